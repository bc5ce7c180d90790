// qwen35moe (Qwen 3.5 35B-A3B and the other Qwen 3.5 mixtures): the qwen35
// hybrid (Gated DeltaNet and gated attention layers, arch_qwen35.cc) with
// every FFN a mixture of experts plus a shared expert behind a sigmoid gate
// (ref/README-moe.md, qwen35moe):
//
//   per layer:  x += mixer(rms(x, attn_norm));  u = rms(x, post_attention_norm)
//               x += MoE(u) + sigmoid(w_sg . u) * Wd_s(silu(Wg_s u) * Wu_s u)
//
// MoE: softmax router, the expert_used_count best renormalised (always, as
// llama.cpp), SwiGLU experts; the shared expert's width is
// expert_shared_feed_forward_length (else feed_forward_length).
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

Status Configure(const gguf::GgufFile& f, ModelConfig& c) {
  MX_RETURN_IF_ERROR(ConfigureQwen35Layers(f, c));
  for (LayerConfig& l : c.layers) l.ffn = Ffn::kMoe;
  MX_RETURN_IF_ERROR(config_keys::ReadMoeSizes(f, "qwen35moe", /*shared=*/true, c));
  c.moe.gating = MoeGating::kSoftmax;
  c.moe.normalize = true;
  c.moe.expert_ffn = Ffn::kSwiGlu;
  c.moe.shared_gate = true;
  return Status::Ok();
}

}  // namespace

const Architecture kQwen35MoeArchitecture = {Arch::kQwen35Moe, "qwen35moe", Configure,
                                             BindQwen35Layer,
    "Qwen 3.5 mixtures of experts (35B-A3B and larger)",
    "tiny-qwen35moe, every routing decision"};

}  // namespace mx::models
