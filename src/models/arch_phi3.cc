// phi3 (Phi-3, Phi-3.5, Phi-4-mini): the dense block with fused
// projections and LongRoPE:
//
//   h = rms(x, attn_norm);  [q | k | v] = Wqkv h      (attn_qkv rows: q | k | v)
//   q, k = rope(q), rope(k)                          (NeoX pairs, first n_rot dims)
//   x += Wo softmax(q.k / sqrt(head_dim)) v
//   u = rms(x, ffn_norm);  [g | up] = Wup u           (ffn_up rows: gate | up)
//   x += Wdown(silu(g) * up)
//
// LongRoPE: theta_i = pos * base^(-2i/n_rot) / factor[i], cos and sin times
// rope.scaling.attn_factor; factor = rope_factors_long when the context holds
// more than rope.scaling.original_context_length tokens, else
// rope_factors_short, chosen once per context (ModelConfig::RopeFactorsFor).
// rope.dimension_count may be below the head dim (partial rotary, Phi-4-mini).
// attention.sliding_window is read and ignored, as llama.cpp does: attention
// is always over the whole context. Files with separate attn_q/k/v load too.
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

Status Configure(const gguf::GgufFile& f, ModelConfig& c) {
  ConfigureDenseLayers(c, kernels::RopeMode::kNeox);
  MX_ASSIGN_OR_RETURN(int64_t sliding_window, config_keys::Int(f, "phi3", "attention.sliding_window", 0));
  (void)sliding_window;  // llama.cpp: "Phi SWA is currently disabled"
  return Status::Ok();
}

Status BindLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
  const int64_t e = c.n_embd;
  const int64_t q_dim = lc.n_head * c.head_dim_k, kv_dim = lc.n_kv_head * c.head_dim_k;
  if (b.Has(Blk(i, "attn_qkv.weight"))) {
    MX_ASSIGN_OR_RETURN(w.attn_norm, b.Vec(Blk(i, "attn_norm.weight"), {e}));
    MX_ASSIGN_OR_RETURN(Matrix qkv, b.Mat(Blk(i, "attn_qkv.weight"), e, q_dim + 2 * kv_dim));
    w.wq = RowSlice(qkv, 0, q_dim);
    w.wk = RowSlice(qkv, q_dim, kv_dim);
    w.wv = RowSlice(qkv, q_dim + kv_dim, kv_dim);
    MX_ASSIGN_OR_RETURN(w.wo, b.Mat(Blk(i, "attn_output.weight"), q_dim, e));
  } else {
    MX_RETURN_IF_ERROR(BindAttention(b, c, i, w));
  }
  MX_ASSIGN_OR_RETURN(w.ffn_norm, b.Vec(Blk(i, "ffn_norm.weight"), {e}));
  MX_ASSIGN_OR_RETURN(Matrix gate_up, b.Mat(Blk(i, "ffn_up.weight"), e, 2 * int64_t{lc.n_ff}));
  w.w_gate = RowSlice(gate_up, 0, lc.n_ff);
  w.w_up = RowSlice(gate_up, lc.n_ff, lc.n_ff);
  MX_ASSIGN_OR_RETURN(w.w_down, b.Mat(Blk(i, "ffn_down.weight"), lc.n_ff, e));
  return Status::Ok();
}

}  // namespace

const Architecture kPhi3Architecture = {Arch::kPhi3, "phi3", Configure, BindLayer,
    "Phi-3, Phi-3.5, Phi-4-mini (LongRoPE)",
    "tiny-phi3"};

}  // namespace mx::models
