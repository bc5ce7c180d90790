// qwen3moe (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): qwen3's attention (q/k RMS
// norms, NeoX RoPE over whole heads) with every FFN a mixture of experts
// (ref/README-moe.md, qwen3moe):
//
//   x = E[tok]
//   per layer:  x += attention(rms(x, attn_norm))                (as qwen3)
//               u = rms(x, ffn_norm);  x += MoE(u)
//   logits = Woutput rms(x, output_norm)     (token_embd when there is no output.weight)
//
// MoE: softmax router over expert_count experts, the expert_used_count best,
// their probabilities renormalised (always: llama.cpp does not read
// expert_weights_norm for this family), SwiGLU experts of
// expert_feed_forward_length (else feed_forward_length / expert_used_count).
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

Status Configure(const gguf::GgufFile& f, ModelConfig& c) {
  ConfigureDenseLayers(c, kernels::RopeMode::kNeox);
  c.qk_norm = true;
  for (LayerConfig& l : c.layers) l.ffn = Ffn::kMoe;
  MX_RETURN_IF_ERROR(config_keys::ReadMoeSizes(f, "qwen3moe", /*shared=*/false, c));
  c.moe.gating = MoeGating::kSoftmax;
  c.moe.normalize = true;
  c.moe.expert_ffn = Ffn::kSwiGlu;
  return Status::Ok();
}

}  // namespace

const Architecture kQwen3MoeArchitecture = {Arch::kQwen3Moe, "qwen3moe", Configure, BindDenseLayer,
    "Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B",
    "tiny-qwen3moe (F32, Q8_0), every routing decision"};

}  // namespace mx::models
