// gemma3 (Gemma 3 text models): sliding-window attention on 5 of every 6
// layers, two RoPE bases, q/k norms and norms before and after the mixer and
// the FFN (ref/README-dense.md, gemma3):
//
//   x = E[tok] * sqrt(n_embd)                                   (token rows only)
//   per layer:  h = rms(x, attn_norm)
//               q, k = rms(Wq h, attn_q_norm), rms(Wk h, attn_k_norm) per head
//               v = Wv h;  q, k = rope_neox(q), rope_neox(k)    (local: base_swa;
//                                                                 global: base, scale)
//               x += rms(Wo softmax(q.k * scale + mask) v, post_attention_norm)
//               u = rms(x, ffn_norm)
//               x += rms(Wdown(gelu(Wgate u) * Wup u), post_ffw_norm)
//   logits = E rms(x, output_norm)         (then cap * tanh(logits / cap) if the file has a cap)
//
// Layer il is local (sliding window) iff attention.sliding_window > 0 and
// il % P < P - 1, P = attention.sliding_window_pattern (default 6; 0: every
// layer local). A local query at p sees keys p - W + 1 ... p. Local layers
// rotate with rope.freq_base_swa (10000 when absent) at frequency scale 1;
// global ones with rope.freq_base and the file's linear scaling. scale =
// 1/sqrt(key_length), but 1/sqrt(n_embd / n_head) for the 62-layer model
// (Gemma 3 27B); query_pre_attn_scalar and attention.scale are not read, as
// llama.cpp reads neither. GELU is the tanh form through llama.cpp's f16
// table (kernels GeGluF16Table). Norm weights are used as stored (the
// converter adds Gemma's +1).
//
// The cache (docs/state_format.md "Sliding-window layers"): a state keeps
// every position's K/V rows on local layers too; the window is a mask, so
// every cut, copy, saved state and context shift continues exactly as on a
// dense model.
#include <cmath>

#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace {

using config_keys::Float;
using config_keys::Int;

constexpr int64_t kDefaultSwaPattern = 6;
constexpr double kDefaultSwaBase = 10000.0;
constexpr int64_t kGemma3_27BLayers = 62;

Status Configure(const gguf::GgufFile &f, ModelConfig &c) {
  for (LayerConfig &l : c.layers) {
    l.mixer = Mixer::kAttention;
    l.ffn = Ffn::kGeGlu;
  }
  c.use_rope = true;
  c.rope.mode = kernels::RopeMode::kNeox;
  c.qk_norm = true;
  c.post_norms = true;
  c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));

  MX_ASSIGN_OR_RETURN(int64_t window, Int(f, "gemma3", "attention.sliding_window", 0));
  MX_ASSIGN_OR_RETURN(int64_t pattern,
                      Int(f, "gemma3", "attention.sliding_window_pattern", kDefaultSwaPattern));
  if (window < 0 || window > (int64_t{1} << 24)) {
    return Status::InvalidArgument("gemma3.attention.sliding_window = " + std::to_string(window) +
                                   ", expected 0..16777216");
  }
  if (pattern < 0 || pattern > 4096) {
    return Status::InvalidArgument("gemma3.attention.sliding_window_pattern = " +
                                   std::to_string(pattern) + ", expected 0..4096");
  }
  MX_ASSIGN_OR_RETURN(double base_swa, Float(f, "gemma3", "rope.freq_base_swa", kDefaultSwaBase));
  if (!(base_swa > 1.0 && base_swa < 1e12)) {
    return Status::InvalidArgument("gemma3.rope.freq_base_swa = " + std::to_string(base_swa) +
                                   ", expected a number above 1");
  }
  c.rope_local_base = static_cast<float>(base_swa);
  if (window > 0) {
    for (size_t il = 0; il < c.layers.size(); ++il) {
      const bool local = pattern == 0 || static_cast<int64_t>(il) % pattern < pattern - 1;
      c.layers[il].window = local ? window : 0;
      c.layers[il].rope_local = local;
    }
  }

  MX_ASSIGN_OR_RETURN(double cap, Float(f, "gemma3", "final_logit_softcapping", 0.0));
  if (!(cap >= 0.0 && cap < 1e6)) {
    return Status::InvalidArgument("gemma3.final_logit_softcapping = " + std::to_string(cap) +
                                   ", expected a positive number");
  }
  c.final_logit_softcap = static_cast<float>(cap);
  if (c.n_layer == kGemma3_27BLayers && c.layers[0].n_head > 0) {
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.layers[0].n_head));
  }
  return Status::Ok();
}

Status BindLayer(WeightBinder &b, const ModelConfig &c, int64_t i, LayerWeights &w) {
  const int64_t e = c.n_embd;
  MX_RETURN_IF_ERROR(BindAttention(b, c, i, w));
  MX_ASSIGN_OR_RETURN(w.post_attn_norm, b.Vec(Blk(i, "post_attention_norm.weight"), {e}));
  MX_RETURN_IF_ERROR(BindFfn(b, c, i, "ffn_norm.weight", w));
  MX_ASSIGN_OR_RETURN(w.post_ffn_norm, b.Vec(Blk(i, "post_ffw_norm.weight"), {e}));
  return Status::Ok();
}

}  // namespace

const Architecture kGemma3Architecture = {Arch::kGemma3, "gemma3", Configure, BindLayer,
    "Gemma 3 text models (sliding-window layers)",
    "tiny-gemma3"};

}  // namespace mx::models
