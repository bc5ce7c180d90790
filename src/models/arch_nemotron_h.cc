// nemotron_h: a hybrid of Mamba2, attention and MLP layers, one kind per layer
// (ref/README "Architectures", ENGINE-FACTS §6).
//
//   x = E[tok]
//   per layer:  x += mixer(rms(x, attn_norm))   where the layer is one of
//     Mamba2     (head_count_kv = 0, feed_forward_length = 0): the Mamba2 mixer
//     attention  (head_count_kv > 0): as llama, without RoPE or biases
//     MLP        (feed_forward_length > 0): Wdown(relu(Wup h)^2)
//   logits = Woutput rms(x, output_norm)
//
// Only the attention layers keep KV rows; the Mamba2 layers keep a conv
// window and an SSM state per sequence.
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {

Status ConfigureNemotronHLayers(const gguf::GgufFile& f, ModelConfig& c) {
  for (LayerConfig& l : c.layers) {
    if (l.n_kv_head == 0 && l.n_ff == 0) {
      l.mixer = Mixer::kMamba2;
      l.ffn = Ffn::kNone;
    } else if (l.n_ff > 0) {
      l.mixer = Mixer::kNone;
      l.ffn = Ffn::kReluSquared;
    } else {
      l.mixer = Mixer::kAttention;
      l.ffn = Ffn::kNone;
    }
  }
  c.use_rope = false;
  return config_keys::ReadSsmSizes(f, ArchName(c.arch), c);
}

Status BindNemotronHLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  switch (c.layers[static_cast<size_t>(i)].mixer) {
    case Mixer::kMamba2:
      return BindMamba2(b, c, i, w);
    case Mixer::kAttention:
      return BindAttention(b, c, i, w);
    default:
      return BindFfn(b, c, i, "attn_norm.weight", w);  // the MLP (or MoE) layer's one norm
  }
}

const Architecture kNemotronHArchitecture = {Arch::kNemotronH, "nemotron_h",
                                             ConfigureNemotronHLayers, BindNemotronHLayer,
    "Nemotron-H (Mamba2 + attention hybrid)",
    "tiny-hybrid-nemotron_h"};

}  // namespace mx::models
