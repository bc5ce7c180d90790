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
//
// RoPE scaling (all three): linear, YaRN (model_config.cc) and, for llama,
// Llama 3.1 / 3.2 frequency factors: theta_i = pos * base^(-2i/n_rot) /
// rope_freqs[i] (tensor rope_freqs.weight [n_rot / 2], every layer). llama's
// head dim may exceed n_embd / n_head (attention.key_length); its
// rope.dimension_count must equal the head dim, as llama.cpp requires.
#include "models/architecture.h"

namespace mx::models {
namespace {

Status Configure(const gguf::GgufFile&, ModelConfig& c) {
  ConfigureDenseLayers(c, c.arch == Arch::kLlama ? kernels::RopeMode::kNormal
                                                 : kernels::RopeMode::kNeox);
  c.qkv_bias = c.arch == Arch::kQwen2;
  c.qk_norm = c.arch == Arch::kQwen3;
  if (c.arch == Arch::kLlama && c.rope.n_rot != c.head_dim_k) {
    return Status::InvalidArgument(
        "llama.rope.dimension_count = " + std::to_string(c.rope.n_rot) +
        ": invalid n_rot, llama rotates whole heads (expected the head dim " +
        std::to_string(c.head_dim_k) + ")");
  }
  return Status::Ok();
}

}  // namespace

void ConfigureDenseLayers(ModelConfig& c, kernels::RopeMode mode) {
  for (LayerConfig& l : c.layers) {
    l.mixer = Mixer::kAttention;
    l.ffn = Ffn::kSwiGlu;
  }
  c.use_rope = true;
  c.rope.mode = mode;
}

Status BindDenseLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  MX_RETURN_IF_ERROR(BindAttention(b, c, i, w));
  return BindFfn(b, c, i, "ffn_norm.weight", w);
}

const Architecture kLlamaArchitecture = {Arch::kLlama, "llama", Configure, BindDenseLayer,
    "Llama 2, Llama 3.x (3.1 / 3.2 / 3.3 frequency factors), DeepSeek-R1 Llama distills, SmolLM2",
    "tiny-llama, tiny-llama31 (F32, F16, Q8_0, Q4_K_M and 17 low-bit files)"};
const Architecture kQwen2Architecture = {Arch::kQwen2, "qwen2", Configure, BindDenseLayer,
    "Qwen2, Qwen2.5",
    "tiny-qwen2-bf16"};
const Architecture kQwen3Architecture = {Arch::kQwen3, "qwen3", Configure, BindDenseLayer,
    "Qwen3 dense models (YaRN-scaled files too)",
    "tiny-qwen3, tiny-qwen3-yarn"};

}  // namespace mx::models
