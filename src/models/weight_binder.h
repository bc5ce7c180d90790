// WeightBinder: looks a model's tensors up by name and checks their shapes and
// types; plus the tensors of each shared layer block, which the architecture
// files bind by name.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "models/model.h"
#include "models/model_config.h"

namespace mx::models {

class WeightBinder {
 public:
  explicit WeightBinder(const gguf::GgufFile& f) : f_(f) {}

  // The tensor `name` with ggml shape `shape` (ne[0] first; trailing 1s do
  // not count). NotFound / InvalidArgument "expected vs. actual" otherwise.
  Result<const gguf::TensorInfo*> Find(const std::string& name, std::vector<int64_t> shape);
  // True when the file has a tensor of that name (any shape).
  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }
  // A matrix of n_out rows of n_in values, pointing into the map; or, where
  // the kernels read rows of its type faster at an alignment the file does
  // not give (kernels.h FastRowAlignment), into an aligned copy kept here
  // (rows padded with zeros to a multiple of it).
  Result<Matrix> Mat(const std::string& name, int64_t n_in, int64_t n_out);
  // A 3-D expert tensor [n_in, n_out_all, n_expert] as every expert's
  // matrix: n_out_all = n_out (one matrix per expert) or 2 n_out (a merged
  // gate_up tensor; `half` 0 the gate rows, 1 the up rows).
  Result<ExpertMatrix> Experts(const std::string& name, int64_t n_in, int64_t n_out,
                               int64_t n_expert, int64_t n_out_all, int half = 0);
  // Any supported type, converted to an owned f32 vector.
  Result<std::vector<float>> Vec(const std::string& name, std::vector<int64_t> shape);

  uint64_t bytes() const { return bytes_; }
  // The aligned copies made so far (the matrices point into them), for the
  // model to keep. The file's pages of a tensor copied leave memory as soon
  // as it is copied; Copied() says whether a file offset was one of them.
  std::vector<OwnedBytes> TakeCopies() { return std::move(copies_); }
  bool Copied(size_t file_offset) const;
  // The tensors copied, in file order.
  const std::vector<const gguf::TensorInfo*>& copied() const { return copied_; }

 private:
  // A matrix of n_rows rows of n_in values from the tensor of `shape`.
  Result<Matrix> MatOf(const std::string& name, std::vector<int64_t> shape, int64_t n_in,
                       int64_t n_rows);

  const gguf::GgufFile& f_;
  uint64_t bytes_ = 0;
  std::unordered_set<const gguf::TensorInfo*> counted_;  // bound twice count once (merged gate_up)
  std::vector<OwnedBytes> copies_;
  std::vector<const gguf::TensorInfo*> copied_;
};

// "blk.{i}.{name}"
std::string Blk(int64_t i, const char* name);
// Rows [first, first + n) of m, pointing into m's storage (a fused
// projection's parts). REQUIRES: first + n <= m.n_rows.
Matrix RowSlice(const Matrix& m, int64_t first, int64_t n);

// The RoPE frequency tables (rope_freqs, rope_factors_long / _short; each
// [n_rot / 2] when present) into c's vectors. Errors name the tensor (shape,
// a value that is not a positive finite number).
Status BindRopeFactors(WeightBinder& b, ModelConfig& c);

// The tensors of the shared blocks of layer i (the mixer's, the FFN's and
// the norm in front of each, by the tensor names llama.cpp uses).
Status BindAttention(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);
Status BindMamba2(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);
Status BindDeltaNet(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w);
// `norm` is the name of the norm in front of the FFN ("ffn_norm.weight",
// "post_attention_norm.weight", ...). An Ffn::kMoe layer's FFN is its
// router, experts (ffn_{gate,up,down}_exps, or a merged ffn_gate_up_exps),
// their biases and the shared expert, as ModelConfig::moe asks.
Status BindFfn(WeightBinder& b, const ModelConfig& c, int64_t i, const char* norm, LayerWeights& w);

}  // namespace mx::models
