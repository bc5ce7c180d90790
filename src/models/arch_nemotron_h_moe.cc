// nemotron_h_moe (Nemotron 3 Nano 30B-A3B): the nemotron_h hybrid (Mamba2,
// attention and FFN layers, arch_nemotron_h.cc) with the FFN layers mixtures
// of experts (ref/README-moe.md, nemotron_h_moe):
//
//   MoE layer:  h = rms(x, attn_norm);  x += MoE(h) + Wd_s relu(Wu_s h)^2
//
// MoE: sigmoid router; the selection bias exp_probs_b is added to choose the
// experts but not to weigh them; experts in expert_group_count groups of
// which the expert_group_used_count best (each scored by its two best
// experts) compete; the chosen weights renormalised when
// expert_weights_norm, times expert_weights_scale (when not 0 or 1); ReLU^2
// experts and one ReLU^2 shared expert of expert_shared_feed_forward_length
// (expert_shared_count is read by llama.cpp but not used).
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

Status Configure(const gguf::GgufFile& f, ModelConfig& c) {
  MX_RETURN_IF_ERROR(ConfigureNemotronHLayers(f, c));
  for (LayerConfig& l : c.layers) {
    if (l.ffn == Ffn::kReluSquared) l.ffn = Ffn::kMoe;
  }
  const std::string arch = "nemotron_h_moe";
  MX_RETURN_IF_ERROR(config_keys::ReadMoeSizes(f, arch, /*shared=*/true, c));
  c.moe.gating = MoeGating::kSigmoid;
  c.moe.selection_bias = true;
  c.moe.expert_ffn = Ffn::kReluSquared;
  if (f.Find(arch + ".expert_weights_norm") != nullptr) {
    MX_ASSIGN_OR_RETURN(c.moe.normalize, f.GetBool(arch + ".expert_weights_norm"));
  }
  MX_ASSIGN_OR_RETURN(double scale, config_keys::Float(f, arch, "expert_weights_scale", 0.0));
  if (!(scale >= 0.0 && scale < 1e6)) {
    return Status::InvalidArgument(arch + ".expert_weights_scale = " + std::to_string(scale) +
                                   ", expected a positive number");
  }
  c.moe.scale = static_cast<float>(scale);
  return Status::Ok();
}

}  // namespace

const Architecture kNemotronHMoeArchitecture = {Arch::kNemotronHMoe, "nemotron_h_moe", Configure,
                                                BindNemotronHLayer,
    "Nemotron 3 Nano 30B-A3B",
    "tiny-nemotron_h_moe, every routing decision"};

}  // namespace mx::models
