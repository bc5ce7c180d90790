// gpt-oss (gpt-oss-20b, gpt-oss-120b): attention with sinks, alternating
// sliding-window and full layers, and a mixture of experts in every layer
// (ref/README-moe.md, gpt-oss):
//
//   x = E[tok]
//   per layer:  h = rms(x, attn_norm)
//               q, k, v = Wq h + bq, Wk h + bk, Wv h + bv   (biases optional)
//               q, k = rope_neox_yarn(q), rope_neox_yarn(k)  (n_rot = key_length)
//               a = softmax over the query's keys and one sink S_h per head
//               x += Wo (a v) + bo
//               u = rms(x, post_attention_norm);  x += MoE(u)
//   logits = Woutput rms(x, output_norm)
//
// Layer il is sliding-window iff il % P < P - 1, P = the scalar
// attention.sliding_window_pattern (default 2; an array value is ignored, as
// llama.cpp's loader ignores it); a sliding query at p sees keys
// p - sliding_window + 1 ... p. Sliding layers rotate with
// rope.freq_base_swa when present, with the file's scaling and YaRN either
// way (the yarn_beta keys are not read: 32 and 1).
//
// MoE: router logits plus ffn_gate_inp.bias; the k largest chosen, their
// weights a softmax over those k logits (no renormalisation); expert e:
//   g = Wg_e u + bg_e, r = Wu_e u + bu_e
//   y_e = Wd_e (min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(r, -7, 7) + 1)) + bd_e
//
// The cache keeps every position's K/V rows on the sliding layers too (the
// window is a mask), as for gemma3 (docs/state_format.md).
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

using config_keys::Float;
using config_keys::Int;

constexpr const char* kArch = "gpt-oss";
constexpr int64_t kDefaultSwaPattern = 2;

Status Configure(const gguf::GgufFile& f, ModelConfig& c) {
  ConfigureDenseLayers(c, kernels::RopeMode::kNeox);
  for (LayerConfig& l : c.layers) l.ffn = Ffn::kMoe;
  const std::string arch = kArch;
  if (f.Find(arch + ".expert_feed_forward_length") == nullptr) {
    return Status::InvalidArgument("missing required metadata key '" + arch +
                                   ".expert_feed_forward_length'");
  }
  MX_RETURN_IF_ERROR(config_keys::ReadMoeSizes(f, arch, /*shared=*/false, c));
  c.moe.gating = MoeGating::kSoftmaxOfTopK;
  c.moe.router_bias = true;
  c.moe.expert_biases = true;
  c.moe.expert_ffn = Ffn::kSwiGluClamped;

  MX_ASSIGN_OR_RETURN(int64_t window, Int(f, arch, "attention.sliding_window", -1));
  MX_RETURN_IF_ERROR(
      config_keys::Positive(arch + ".attention.sliding_window", window, int64_t{1} << 24));
  int64_t pattern = kDefaultSwaPattern;
  if (const gguf::Value* v = f.Find(arch + ".attention.sliding_window_pattern");
      v != nullptr && v->type != gguf::ValueType::kArray) {
    MX_ASSIGN_OR_RETURN(pattern, f.GetInt(arch + ".attention.sliding_window_pattern"));
    MX_RETURN_IF_ERROR(
        config_keys::Positive(arch + ".attention.sliding_window_pattern", pattern, 4096));
  }
  const bool swa_base = f.Find(arch + ".rope.freq_base_swa") != nullptr;
  if (swa_base) {
    MX_ASSIGN_OR_RETURN(double base, Float(f, arch, "rope.freq_base_swa", 0.0));
    if (!(base > 1.0 && base < 1e12)) {
      return Status::InvalidArgument(arch + ".rope.freq_base_swa = " + std::to_string(base) +
                                     ", expected a number above 1");
    }
    c.rope_local_base = static_cast<float>(base);
    c.rope_local_scaled = true;
  }
  for (size_t il = 0; il < c.layers.size(); ++il) {
    const bool sliding = static_cast<int64_t>(il) % pattern < pattern - 1;
    c.layers[il].window = sliding ? window : 0;
    c.layers[il].rope_local = sliding && swa_base;
  }
  return Status::Ok();
}

Status BindLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
  const int64_t q_dim = lc.n_head * c.head_dim_k, kv_dim = lc.n_kv_head * c.head_dim_k;
  MX_RETURN_IF_ERROR(BindAttention(b, c, i, w));
  const std::pair<const char*, std::vector<float>*> optional[] = {
      {"attn_q.bias", &w.bq}, {"attn_k.bias", &w.bk}, {"attn_v.bias", &w.bv}};
  for (const auto& [name, out] : optional) {
    if (!b.Has(Blk(i, name))) continue;
    MX_ASSIGN_OR_RETURN(*out, b.Vec(Blk(i, name), {out == &w.bq ? q_dim : kv_dim}));
  }
  MX_ASSIGN_OR_RETURN(w.bo, b.Vec(Blk(i, "attn_output.bias"), {c.n_embd}));
  MX_ASSIGN_OR_RETURN(w.attn_sinks, b.Vec(Blk(i, "attn_sinks.weight"), {lc.n_head}));
  return BindFfn(b, c, i, "post_attention_norm.weight", w);
}

}  // namespace

const Architecture kGptOssArchitecture = {Arch::kGptOss, kArch, Configure, BindLayer,
    "gpt-oss-20b, gpt-oss-120b (MXFP4 experts)",
    "tiny-gpt-oss (F32, MXFP4_MOE), every routing decision"};

}  // namespace mx::models
