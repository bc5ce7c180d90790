// GGUF v3 writer: metadata of every type and tensors with their raw bytes,
// laid out exactly as llama.cpp expects (offsets = running sum of aligned
// sizes, zero padding). Used by `matricxon make-model` and by tests that build
// small or hostile files.
#pragma once

#include <cstdint>
#include <functional>
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
  void SetU8(const std::string& key, uint8_t v);
  void SetI8(const std::string& key, int8_t v);
  void SetU16(const std::string& key, uint16_t v);
  void SetI16(const std::string& key, int16_t v);
  void SetI64(const std::string& key, int64_t v);
  void SetF64(const std::string& key, double v);
  // Any value as the reader returns it (scalar or array of any element type),
  // e.g. to copy metadata from one file to another. Integers are taken from
  // `i` (and `ints`), cast to the value's type. InvalidArgument when the type
  // ids are unknown, the array is nested, or an integer does not fit its type.
  Status SetValue(const std::string& key, const Value& v);
  // Writes general.alignment and lays the data section out with it.
  // REQUIRES: a power of two. Setting general.alignment through another setter
  // also changes the layout when the value is a power of two; any other value
  // is written as given (useful for building hostile test files) and the
  // layout keeps the previous alignment.
  void SetU32Alignment(uint32_t alignment);

  // Adds a tensor; `bytes` must be exactly RowBytes(type, shape[0]) * rows.
  // InvalidArgument (naming the tensor, expected vs. actual) when the name is
  // empty, 64 bytes or longer or already used, the shape has not 1..4 positive
  // dims, ne[0] is not a multiple of the type's block size, or the size is off.
  Status AddTensor(const std::string& name, DType type, std::vector<int64_t> shape,
                   std::string bytes);

  // Declares a tensor whose bytes come later, from WriteStreaming's `fill`
  // (for files larger than memory). The checks of AddTensor but the size.
  Status DeclareTensor(const std::string& name, DType type, std::vector<int64_t> shape);
  // Asks for declared tensor i's bytes (the index among all tensors, in the
  // order they were added); must set exactly its size.
  using FillFn = std::function<Status(size_t index, std::string* bytes)>;

  // The whole file as bytes. REQUIRES: no declared tensors.
  std::string Serialize() const;
  // Serialize() published atomically at `path` (tmp, fsync, rename);
  // InvalidArgument naming a declared tensor, if there is one.
  Status WriteTo(Env* env, const std::string& path) const;
  // The file written tensor by tensor to a temporary next to `path`, fsynced
  // and renamed over it (folder fsynced); each declared tensor's bytes are
  // asked for when its turn comes, so at most one tensor is in memory. The
  // temporary is removed on any error (a fill error, a wrong size, a full disk).
  Status WriteStreaming(Env* env, const std::string& path, const FillFn& fill) const;

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
    size_t n_bytes = 0;
    bool declared = false;  // bytes come from WriteStreaming's fill
  };
  // The checks of AddTensor / DeclareTensor; the tensor's size in bytes.
  Result<size_t> CheckTensor(const std::string& name, DType type,
                             const std::vector<int64_t>& shape) const;
  // Magic, metadata and tensor infos, padded to the data section.
  std::string SerializeHeader() const;
  // Replaces the value of an existing key in place, else appends.
  void Put(const std::string& key, std::string encoded);
  void PutInt(const std::string& key, ValueType type, int64_t v);
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace mx::gguf
