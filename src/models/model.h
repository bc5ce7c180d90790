// Model: a loaded GGUF file (mmapped), its config, and its weights bound by
// name with their shapes checked. Matrices point into the map (no copies);
// small vectors (norm weights, biases, SSM parameters) are converted to owned
// f32 copies at load so that kernels never see their storage type.
//
// Thread-safety: immutable after Load(); share one Model across threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "gguf/gguf_file.h"
#include "kernels/kernels.h"
#include "models/model_config.h"

namespace mx::models {

using kernels::Matrix;

struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  // Attention (kAttentionFfn, kAttention)
  Matrix wq;                     // [n_embd] -> [n_head * head_dim]
  Matrix wk;                     // [n_embd] -> [n_kv_head * head_dim]
  Matrix wv;                     // [n_embd] -> [n_kv_head * head_dim]
  Matrix wo;                     // [n_head * head_dim] -> [n_embd]
  std::vector<float> bq, bk, bv;  // qwen2 biases, empty otherwise
  std::vector<float> q_norm, k_norm;  // qwen3 [head_dim], empty otherwise
  // Feed-forward (kAttentionFfn: SwiGLU; kMlp: up/down only)
  std::vector<float> ffn_norm;   // [n_embd] (kAttentionFfn)
  Matrix w_gate;                 // [n_embd] -> [n_ff]
  Matrix w_up;                   // [n_embd] -> [n_ff]
  Matrix w_down;                 // [n_ff] -> [n_embd]
  // Mamba2 (kMamba2)
  Matrix ssm_in;                 // [n_embd] -> [2*d_inner + 2*G*d_state + H]
  std::vector<float> ssm_conv_w;  // [C, d_conv] (channel-major, k = 0 oldest)
  std::vector<float> ssm_conv_b;  // [C]
  std::vector<float> ssm_dt_bias;  // [H]
  std::vector<float> ssm_a;       // [H] (already -exp(A_log))
  std::vector<float> ssm_d;       // [H]
  std::vector<float> ssm_norm;    // [d_inner] (G groups of d_inner/G)
  Matrix ssm_out;                // [d_inner] -> [n_embd]
};

struct LoadOptions {
  // Called with (bytes done, bytes total) while the model is read.
  std::function<void(uint64_t, uint64_t)> progress;
  // Touch every weight page at load so the first request does not pay for it.
  bool prefault = true;
};

class Model {
 public:
  // Opens, validates and binds `path`. Errors name the file and the tensor
  // (missing, wrong shape: expected vs. actual, unsupported type).
  static Result<std::unique_ptr<Model>> Load(Env* env, const std::string& path,
                                             const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return *file_; }
  const std::string& path() const { return file_->path(); }

  const Matrix& token_embd() const { return token_embd_; }  // [n_vocab rows of n_embd]
  const Matrix& output() const { return output_; }          // [n_vocab rows of n_embd]
  const std::vector<float>& output_norm() const { return output_norm_; }
  const LayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }

  // Bytes of weights (tensor data in the file).
  uint64_t weight_bytes() const { return weight_bytes_; }

 private:
  Model() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  Matrix token_embd_;
  Matrix output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  uint64_t weight_bytes_ = 0;
  friend class WeightBinder;
};

}  // namespace mx::models
