// granite (IBM Granite 3.x dense): the llama block with four scales
// (granite.* keys):
//
//   x = E[tok] * embedding_scale
//   per layer:  x += residual_scale * Wo softmax(q.k * attention_scale) v
//               x += residual_scale * Wdown(silu(Wgate u) * Wup u)
//   logits = (Wout rms(x, output_norm)) / logit_scale
//
// logit_scale is required; the others default to off (attention_scale:
// 1/sqrt(head_dim)). RoPE normal pairs; rope.scaling.finetuned = false
// (default true) turns RoPE off altogether, as llama.cpp reads it.
#include <cmath>


#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

using config_keys::Float;

Result<float> PositiveScale(const gguf::GgufFile& f, const std::string& suffix, double fallback) {
  MX_ASSIGN_OR_RETURN(double v, Float(f, "granite", suffix, fallback));
  if (!(v > 0.0 && v < 1e6)) {
    return Status::InvalidArgument("granite." + suffix + " = " + std::to_string(v) +
                                   ", expected a positive number");
  }
  return static_cast<float>(v);
}

Status Configure(const gguf::GgufFile& f, ModelConfig& c) {
  ConfigureDenseLayers(c, kernels::RopeMode::kNormal);
  if (f.Find("granite.logit_scale") == nullptr) {
    return Status::InvalidArgument("missing required metadata key 'granite.logit_scale'");
  }
  MX_ASSIGN_OR_RETURN(c.logit_scale, PositiveScale(f, "logit_scale", 1.0));
  MX_ASSIGN_OR_RETURN(c.embedding_scale, PositiveScale(f, "embedding_scale", 1.0));
  MX_ASSIGN_OR_RETURN(c.residual_scale, PositiveScale(f, "residual_scale", 1.0));
  MX_ASSIGN_OR_RETURN(c.attention_scale,
                      PositiveScale(f, "attention.scale", 1.0 / std::sqrt(double(c.head_dim_k))));
  if (f.Find("granite.rope.scaling.finetuned") != nullptr) {
    MX_ASSIGN_OR_RETURN(bool finetuned, f.GetBool("granite.rope.scaling.finetuned"));
    c.use_rope = finetuned;
  }
  return Status::Ok();
}

}  // namespace

const Architecture kGraniteArchitecture = {Arch::kGranite, "granite", Configure, BindDenseLayer,
    "Granite 3.x",
    "tiny-granite"};

}  // namespace mx::models
