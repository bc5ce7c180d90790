// mistral3 (Ministral 3, Mistral Small 3.x text models): the llama block
// with YaRN read in full and Llama 4's attention temperature:
//
//   per layer:  q, k = rope(q, pos), rope(k, pos)      (normal pairs, YaRN)
//               q *= 1 + beta * ln(floor(pos / n_orig) + 1)   (beta != 0)
//               x += Wo softmax(q.k / sqrt(head_dim)) v;  x += SwiGLU FFN
//
// beta is attention.temperature_scale, n_orig
// rope.scaling.original_context_length (so the factor is 1 for the first n_orig
// positions). Unlike the other families, mistral3 reads YaRN's
// rope.scaling.yarn_beta_fast, yarn_beta_slow and yarn_log_multiplier: with a
// log multiplier m the magnitude 1 + 0.1 ln(f) YaRN puts on cos and sin becomes
// (1 + 0.1 ln f) / (1 + 0.1 m ln f), computed in llama.cpp's order.
// rope_freqs.weight is used when present, as for llama.
#include <cmath>

#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

using config_keys::Float;

Result<float> InRange(const gguf::GgufFile &f, const std::string &suffix,
                      double fallback, double lo, double hi) {
  MX_ASSIGN_OR_RETURN(double v, Float(f, "mistral3", suffix, fallback));
  if (!(v >= lo && v <= hi)) {
    return Status::InvalidArgument(
        "mistral3." + suffix + " = " + std::to_string(v) + ", expected " +
        std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<float>(v);
}

Status Configure(const gguf::GgufFile &f, ModelConfig &c) {
  ConfigureDenseLayers(c, kernels::RopeMode::kNormal);
  if (c.rope.n_rot != c.head_dim_k) {
    return Status::InvalidArgument(
        "mistral3.rope.dimension_count = " + std::to_string(c.rope.n_rot) +
        ": mistral3 rotates whole heads (expected the head dim " +
        std::to_string(c.head_dim_k) + ")");
  }
  MX_ASSIGN_OR_RETURN(
      c.rope.beta_fast,
      InRange(f, "rope.scaling.yarn_beta_fast", 32.0, 0.0, 1e4));
  MX_ASSIGN_OR_RETURN(c.rope.beta_slow,
                      InRange(f, "rope.scaling.yarn_beta_slow", 1.0, 0.0, 1e4));
  MX_ASSIGN_OR_RETURN(
      float log_mul,
      InRange(f, "rope.scaling.yarn_log_multiplier", 0.0, 0.0, 1e3));
  if (c.rope.ext_factor != 0.0f && log_mul != 0.0f) {
    // llama.cpp's yarn_attn_factor: mscale(f, 1) / mscale(f, m), times the
    // cancel of the 1 + 0.1 ln f the rotation puts on top, times
    // rope.scaling.attn_factor.
    const float factor = 1.0f / c.rope.freq_scale;
    auto mscale = [&](float m) {
      return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f;
    };
    float a = mscale(1.0f) / mscale(log_mul);
    a *= 1.0f / (1.0f + 0.1f * std::log(factor));
    c.rope.attn_factor = a * c.rope.attn_factor;
  }
  MX_ASSIGN_OR_RETURN(c.attn_temperature_scale,
                      InRange(f, "attention.temperature_scale", 0.0, 0.0, 1e3));
  c.attn_temperature_floor = c.rope.n_ctx_orig;
  return Status::Ok();
}

} // namespace

const Architecture kMistral3Architecture = {Arch::kMistral3, "mistral3",
                                            Configure, BindDenseLayer,
    "Ministral 3, Mistral Small 3.x (Llama 4 attention temperature)",
    "tiny-mistral3 (derived; llama.cpp 81ff7abe5 run beside the project)"};

} // namespace mx::models
