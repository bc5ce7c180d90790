// smollm3 (SmolLM3): the llama block (normal RoPE pairs (2i, 2i+1), GQA,
// key_length head dim) with no RoPE at all on every 4th layer (NoPE):
//
//   per layer il:  q, k = rope(q), rope(k)   unless (il + 1) % 4 == 0
//
// The interval is fixed (llama.cpp reads no key for it; the converter's
// no_rope_layer_interval is ignored). A NoPE layer still keeps KV rows and
// the causal mask; a context shift leaves its keys as they are.
#include "models/architecture.h"

namespace mx::models {
namespace {

constexpr size_t kNoRopeInterval = 4;

Status Configure(const gguf::GgufFile&, ModelConfig& c) {
  ConfigureDenseLayers(c, kernels::RopeMode::kNormal);
  for (size_t il = 0; il < c.layers.size(); ++il) {
    c.layers[il].rope = (il + 1) % kNoRopeInterval != 0;
  }
  return Status::Ok();
}

}  // namespace

const Architecture kSmolLm3Architecture = {Arch::kSmolLm3, "smollm3", Configure, BindDenseLayer,
    "SmolLM3 (NoPE layers)",
    "tiny-smollm3"};

}  // namespace mx::models
