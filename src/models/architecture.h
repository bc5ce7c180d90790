// Architecture: what one model family adds to the hyperparameters and tensors
// every GGUF model shares. Each family lives in its own file (arch_*.cc) that
// reads like a model card: the keys it reads, the mixer and FFN of each layer,
// the tensors each layer binds, and the forward pass written out in its
// header comment. The runner runs every family with the same loop
//   x = E[tok];  per layer: x += Mixer(rms(x, attn_norm)); x += Ffn(rms(x, ffn_norm))
//   logits = output(rms(x, output_norm))
// (times ModelConfig's embedding and residual scales, over its logit scale:
// all 1 but for granite)
// over shared blocks (runner_*.cc), so adding a family is a new arch file plus
// the blocks it needs that do not exist yet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace mx::models {

struct Architecture {
  Arch arch;
  const char* name;  // general.architecture
  // Completes `c` (the shared keys are read already: sizes, head counts, FFN
  // sizes, head dims, eps, RoPE base and scaling) with the family's layers,
  // RoPE mode and dims, flags and recurrent sizes. Errors name the key.
  Status (*configure)(const gguf::GgufFile& f, ModelConfig& c);
  // Binds every tensor of layer i. Errors name the tensor (missing, shape).
  Status (*bind_layer)(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);
  const char* models;     // the releases whose files carry this architecture (docs/models.md)
  const char* reference;  // the ../shared/ref sets it is checked against
};

// The family of general.architecture `name`, or null when unsupported.
const Architecture* FindArchitecture(std::string_view name);
// "llama, qwen2, ..." for error messages.
std::string SupportedArchitectureNames();
// The table of docs/models.md: one Markdown row per architecture.
std::string ArchitectureTable();

// The dense block shared by the llama-like families (arch_dense.cc): every
// layer attention + SwiGLU FFN with RoPE in `mode`; separate q/k/v and
// ffn_gate/up/down tensors behind attn_norm / ffn_norm.
void ConfigureDenseLayers(ModelConfig& c, kernels::RopeMode mode);
Status BindDenseLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);

// The hybrid trunks their mixture-of-experts variants share
// (arch_qwen35.cc, arch_nemotron_h.cc): every layer's mixer and FFN (the
// variant then turns the FFNs into Ffn::kMoe; BindFfn binds either).
Status ConfigureQwen35Layers(const gguf::GgufFile& f, ModelConfig& c);
Status BindQwen35Layer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);
Status ConfigureNemotronHLayers(const gguf::GgufFile& f, ModelConfig& c);
Status BindNemotronHLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);

// The families (arch_*.cc).
extern const Architecture kLlamaArchitecture;
extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kNemotronHArchitecture;
extern const Architecture kQwen35Architecture;
extern const Architecture kSmolLm3Architecture;
extern const Architecture kGraniteArchitecture;
extern const Architecture kPhi3Architecture;
extern const Architecture kMistral3Architecture;
extern const Architecture kGemma3Architecture;
extern const Architecture kQwen3MoeArchitecture;
extern const Architecture kQwen35MoeArchitecture;
extern const Architecture kNemotronHMoeArchitecture;
extern const Architecture kGptOssArchitecture;

}  // namespace mx::models
