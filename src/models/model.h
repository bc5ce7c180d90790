// Model: a loaded GGUF file (mmapped), its config, and its weights bound by
// name with their shapes checked. Matrices point into the map (no copies);
// small vectors (norm weights, biases, SSM parameters) are converted to owned
// f32 copies at load so that kernels never see their storage type.
//
// Thread-safety: immutable after Load(); share one Model across threads.
#pragma once

#include <cstdint>
#include <cstdlib>
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

// Weight bytes a model owns (aligned copies of tensors), freed with free().
struct FreeBytes {
  void operator()(uint8_t* p) const { std::free(p); }
};
using OwnedBytes = std::unique_ptr<uint8_t, FreeBytes>;

// The experts of one kind of matrix (gate, up or down) of a mixture of
// experts: expert e's n_out rows are rows e * stride + first ... + n_out - 1
// of `all` (a 3-D [n_in, n_out, n_expert] tensor: stride n_out, first 0; a
// merged gate_up tensor's gate or up half: stride 2 n_out). Points into the
// file's mapping like any matrix.
struct ExpertMatrix {
  Matrix all;
  int64_t n_out = 0;
  int64_t stride = 0;
  int64_t first = 0;
  Matrix Of(int64_t e) const {
    Matrix m = all;
    m.data += static_cast<size_t>(e * stride + first) * all.row_bytes;
    m.n_rows = n_out;
    return m;
  }
};

// A mixture-of-experts FFN's tensors (ModelConfig::moe says which are set).
struct MoeWeights {
  Matrix router;                       // ffn_gate_inp: [n_embd] -> [n_expert]
  std::vector<float> router_bias;      // [n_expert] (gpt-oss)
  std::vector<float> selection_bias;   // [n_expert] exp_probs_b (nemotron_h_moe)
  ExpertMatrix gate, up, down;         // gate unset for kReluSquared experts
  std::vector<float> gate_bias, up_bias, down_bias;  // [n_expert * n_out] (gpt-oss)
  Matrix shared_gate, shared_up, shared_down;  // the shared expert (n_ff_shared > 0)
  std::vector<float> shared_gate_inp;  // [n_embd] its sigmoid gate (qwen35moe)
};

// A layer's tensors; which ones are set depends on its mixer and FFN.
struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd] (before the mixer)
  // Attention (kAttention, kGatedAttention)
  Matrix wq;                     // [n_embd] -> [n_head * head_dim] (gated: [n_head * 2 * head_dim],
                                 //   per head [q (head_dim) | gate (head_dim)])
  Matrix wk;                     // [n_embd] -> [n_kv_head * head_dim]
  Matrix wv;                     // [n_embd] -> [n_kv_head * head_dim]
  Matrix wo;                     // [n_head * head_dim] -> [n_embd]
  std::vector<float> bq, bk, bv;  // q/k/v biases (qwen2, gpt-oss), empty otherwise
  std::vector<float> bo;          // [n_embd] output bias (gpt-oss), else empty
  std::vector<float> attn_sinks;  // [n_head] one softmax sink logit per head (gpt-oss), else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] per-head RMS norms (qwen3, qwen35), else empty
  // Feed-forward (kSwiGlu: gate/up/down; kReluSquared: up/down)
  std::vector<float> ffn_norm;   // [n_embd] (before the FFN)
  Matrix w_gate;                 // [n_embd] -> [n_ff]
  Matrix w_up;                   // [n_embd] -> [n_ff]
  Matrix w_down;                 // [n_ff] -> [n_embd]
  MoeWeights moe;                // Ffn::kMoe
  // Norms of the mixer's and the FFN's outputs (ModelConfig::post_norms),
  // else empty.
  std::vector<float> post_attn_norm;  // [n_embd]
  std::vector<float> post_ffn_norm;   // [n_embd]
  // Recurrent mixers (kMamba2, kDeltaNet); C = conv channels, H = ssm_n_head
  Matrix ssm_in;                 // Mamba2: [n_embd] -> [2*d_inner + 2*G*d_state + H]
  Matrix ssm_qkv;                // DeltaNet: [n_embd] -> [C] (q | k | v)
  Matrix ssm_gate;               // DeltaNet: [n_embd] -> [d_inner] (z)
  Matrix ssm_alpha;              // DeltaNet: [n_embd] -> [H] (decay input)
  Matrix ssm_beta;               // DeltaNet: [n_embd] -> [H] (write strength)
  std::vector<float> ssm_conv_w;  // [C, d_conv] (channel-major, k = 0 oldest)
  std::vector<float> ssm_conv_taps;  // DeltaNet: the same weights tap-major, [d_conv][C]
  std::vector<float> ssm_conv_b;  // [C] (zeros when the file has none)
  std::vector<float> ssm_dt_bias;  // [H]
  std::vector<float> ssm_a;       // [H] (already -exp(A_log))
  std::vector<float> ssm_d;       // [H] (Mamba2)
  std::vector<float> ssm_norm;    // Mamba2: [d_inner] (G groups); DeltaNet: [d_inner / H]
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
  // The file's pages of the tensors the model reads from aligned copies
  // (weight_binder.h) leave memory again; for whoever read the whole file
  // (the saved caches' model hash).
  void DropCopiedFilePages() const;

 private:
  Model() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  Matrix token_embd_;
  Matrix output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  uint64_t weight_bytes_ = 0;
  std::vector<OwnedBytes> weight_copies_;                // aligned copies some matrices point into
  std::vector<const gguf::TensorInfo*> copied_tensors_;  // the tensors they copy
};

}  // namespace mx::models
