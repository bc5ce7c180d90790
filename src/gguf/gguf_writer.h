// GGUF v3 writer: metadata of every type and tensors with their raw bytes,
// laid out exactly as llama.cpp expects (offsets = running sum of aligned
// sizes, zero padding). Used by `matricxon make-model` and by tests that build
// small or hostile files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"
#include "gguf/gguf_file.h"

namespace mx::gguf {

class GgufWriter {
 public:
  void SetString(const std::string& key, const std::string& v);
  void SetU32(const std::string& key, uint32_t v);
  void SetI32(const std::string& key, int32_t v);
  void SetU64(const std::string& key, uint64_t v);
  void SetF32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v);
  void SetF32Array(const std::string& key, const std::vector<float>& v);
  void SetU32Alignment(uint32_t alignment);  // writes general.alignment

  // Adds a tensor; `bytes` must be exactly RowBytes(type, shape[0]) * rows.
  Status AddTensor(const std::string& name, DType type, std::vector<int64_t> shape,
                   std::string bytes);

  // The whole file as bytes.
  std::string Serialize() const;
  // Serialize() published atomically at `path` (tmp, fsync, rename).
  Status WriteTo(Env* env, const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    std::string encoded;  // type id + payload, already little-endian
  };
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  void Put(const std::string& key, std::string encoded);
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace mx::gguf
