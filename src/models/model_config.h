// ModelConfig: the hyperparameters of a model, read from GGUF metadata
// (ENGINE-FACTS §1.5) and validated once, as plain data. Per-layer entries
// carry what differs between layers (hybrid models mix layer kinds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "kernels/kernels.h"

namespace mx::models {

enum class Arch { kLlama, kQwen2, kQwen3, kNemotronH };
const char* ArchName(Arch arch);

enum class LayerKind {
  kAttentionFfn,  // dense transformer block: attention then SwiGLU FFN
  kAttention,     // attention only (nemotron_h)
  kMamba2,        // Mamba2 mixer (nemotron_h)
  kMlp,           // up -> ReLU^2 -> down (nemotron_h)
};

struct LayerConfig {
  LayerKind kind = LayerKind::kAttentionFfn;
  int n_head = 0;
  int n_kv_head = 0;
  int n_ff = 0;
  bool has_attention() const {
    return kind == LayerKind::kAttentionFfn || kind == LayerKind::kAttention;
  }
};

struct ModelConfig {
  Arch arch = Arch::kLlama;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t head_dim_k = 0;  // key_length
  int64_t head_dim_v = 0;  // value_length
  float rms_eps = 1e-5f;
  bool use_rope = true;
  kernels::RopeParams rope;  // n_rot, base, scale, mode
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3
  bool tied_output = false;  // output head = token_embd (decided from the tensors)
  std::vector<LayerConfig> layers;  // [n_layer]

  // Mamba2 (nemotron_h); zero for dense models.
  int64_t ssm_d_conv = 0;
  int64_t ssm_d_inner = 0;
  int64_t ssm_d_state = 0;
  int64_t ssm_n_head = 0;
  int64_t ssm_n_group = 0;
  int64_t ssm_conv_channels() const { return ssm_d_inner + 2 * ssm_n_group * ssm_d_state; }

  int64_t n_attention_layers() const;
  int64_t n_recurrent_layers() const;

  // Reads and validates the hyperparameters. Errors name the key and the
  // expected vs. actual value: unknown architecture -> NotSupported.
  static Result<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace mx::models
