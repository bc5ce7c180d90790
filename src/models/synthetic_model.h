// Synthetic GGUF models of any shape, with deterministic pseudo-random
// weights and a real byte-level BPE tokenizer plus a ChatML template in the
// metadata. `matricxon make-model`, tests and benchmarks use them, so that no
// downloaded model is ever needed.
//
// Weights follow ../shared/ref/README.md's recipe (so activations stay sane
// at any depth): projections N(0, 1/fan_in), an untied output head
// N(0, 4/fan_in), norm weights 1 + 0.1 N(0, 1), token embeddings N(0, 1)
// (0.15 when tied to the output head), qwen2 q/k/v biases N(0, 0.25).
// Every tensor draws from its own stream seeded by (seed, tensor name), so
// the same spec always writes the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"

namespace mx::models {

struct SyntheticSpec {
  std::string name = "synthetic";
  std::string arch = "llama";  // llama, qwen2, qwen3, nemotron_h
  int64_t n_layer = 4;
  int64_t n_embd = 128;
  int64_t n_head = 4;
  int64_t n_kv_head = 2;
  int64_t head_dim = 0;  // 0: n_embd / n_head
  int64_t n_ff = 256;
  int64_t n_vocab = 4096;
  int64_t n_ctx = 2048;
  DType weight_type = DType::kF32;  // 2-D matrices; norms and biases stay F32
  // Instead of one weight type, the mix llama.cpp's quantizer writes for
  // Q4_K_M (see Q4KMTensorType); weight_type is then ignored.
  bool q4_k_m = false;
  bool tied_embeddings = false;
  float rope_theta = 0;  // 0: 1e4 for llama, 1e6 for qwen2/qwen3
  uint64_t seed = 1;
  // nemotron_h (hybrid): the layer kinds, repeated to n_layer: 'M' Mamba2,
  // '*' attention (no RoPE), '-' MLP (up, ReLU^2, down). The Mamba2 layers
  // have d_inner = 2 * n_embd split in heads of ssm_head_dim, ssm_groups
  // groups, ssm_state state size and a causal conv of ssm_conv taps.
  std::string layer_pattern = "M-M*-M*-";
  int64_t ssm_state = 16;
  int64_t ssm_groups = 2;
  int64_t ssm_head_dim = 32;
  int64_t ssm_conv = 4;
};

// Named shapes: "tiny" (the ref tiny-llama shape), "smollm2-135m",
// "qwen3-0.6b", "llama-135m". InvalidArgument listing the names otherwise.
Result<SyntheticSpec> SyntheticPreset(std::string_view preset);
std::vector<std::string> SyntheticPresetNames();

// Checks the spec (positive sizes, heads dividing, the weight type writable
// and matching the row lengths). Errors name the field.
Status ValidateSyntheticSpec(const SyntheticSpec& spec);

// The type llama.cpp's Q4_K_M quantization gives a matrix: Q4_K, with Q6_K
// for the output head (the token embeddings when tied) and for the attn_v /
// ffn_down of layers where llama.cpp's "use more bits" rule holds (the first
// and last eighth of the layers and every third one between); a matrix whose
// rows are not a multiple of 256 values falls back to Q5_0 (for Q4_K) or Q8_0
// (for Q6_K). `name` is the tensor name, `layer` its block index (or -1).
DType Q4KMTensorType(const SyntheticSpec& spec, std::string_view name, int64_t layer,
                     int64_t n_cols);

// Writes the model to `path` atomically. progress(done, total) in bytes.
Status WriteSyntheticModel(Env* env, const SyntheticSpec& spec, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress = {});

// The byte-level BPE vocabulary make-model writes: 256 byte tokens, merges
// learned from a built-in English corpus, unused padding tokens, then
// <|endoftext|>, <|im_start|>, <|im_end|> as the last three ids.
struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
};
SyntheticVocab BuildSyntheticVocab(int64_t n_vocab);

// The ChatML template written into every synthetic model.
extern const char kChatmlTemplate[];

}  // namespace mx::models
