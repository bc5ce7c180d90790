// Dense transformers: llama, qwen2, qwen3 (ref/README "Architectures").
//
//   x = E[tok]
//   per layer:  h = rms(x, attn_norm)
//               q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv), split in heads
//               q, k = rms(q, q_norm), rms(k, k_norm) per head   (qwen3)
//               q, k = rope(q, pos), rope(k, pos)
//               x += Wo softmax(q.k / sqrt(head_dim)) v          (GQA: head j uses kv head j /
//               group) u = rms(x, ffn_norm);  x += Wdown(silu(Wgate u) * Wup u)
//   logits = Woutput rms(x, output_norm)     (token_embd when there is no output.weight)
//
// llama: RoPE pairs (2i, 2i+1); qwen2: q/k/v biases, NeoX pairs (i, i + n_rot/2);
// qwen3: per-head q/k RMS norms before RoPE, NeoX.
#include "models/architecture.h"

namespace mx::models {
namespace {

Status Configure(const gguf::GgufFile&, ModelConfig& c) {
  for (LayerConfig& l : c.layers) {
    l.mixer = Mixer::kAttention;
    l.ffn = Ffn::kSwiGlu;
  }
  c.use_rope = true;
  c.rope.mode = c.arch == Arch::kLlama ? kernels::RopeMode::kNormal : kernels::RopeMode::kNeox;
  c.qkv_bias = c.arch == Arch::kQwen2;
  c.qk_norm = c.arch == Arch::kQwen3;
  return Status::Ok();
}

Status BindLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  MX_RETURN_IF_ERROR(BindAttention(b, c, i, w));
  return BindFfn(b, c, i, "ffn_norm.weight", w);
}

}  // namespace

const Architecture kLlamaArchitecture = {Arch::kLlama, "llama", Configure, BindLayer};
const Architecture kQwen2Architecture = {Arch::kQwen2, "qwen2", Configure, BindLayer};
const Architecture kQwen3Architecture = {Arch::kQwen3, "qwen3", Configure, BindLayer};

}  // namespace mx::models
