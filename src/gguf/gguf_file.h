// GGUF v3 reader over mmap (../shared/ENGINE-FACTS.md §1). Open() validates
// the whole header, metadata and tensor table before returning: every length,
// count, type id, shape, offset and alignment is checked against the file size,
// so a truncated, damaged or hostile file gets a clear error (naming the key
// or tensor and expected vs. actual) and never a crash, an out-of-bounds read
// or a huge allocation. Tensor bytes are not copied: they point into the map.
//
// Thread-safety: immutable after Open(); safe to share across threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"

namespace mx::gguf {

// GGUF metadata value type ids (§1.2).
enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6,
  kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* ValueTypeName(ValueType t);

// One metadata value. Scalars are widened on read: any integer type (and
// bool, as 0/1) lives in `i`; `u` holds the same value's bits as a u64, so a
// u64 above INT64_MAX is exact in `u` (and wraps to a negative `i`). Floats
// live in `f`. Arrays hold elements of one type (u64 elements above INT64_MAX
// wrap in `ints`); strings are copied out of the map so that the value
// outlives nothing in particular.
struct Value {
  ValueType type = ValueType::kU8;
  ValueType array_type = ValueType::kU8;  // element type when type == kArray
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  std::string str;
  // Array payloads (only the one matching array_type is filled):
  std::vector<int64_t> ints;         // integer and bool elements
  std::vector<double> floats;        // f32 / f64 elements
  std::vector<std::string> strings;  // string elements

  bool is_integer() const;  // scalar integer or bool
  bool is_float() const;
  size_t array_size() const;
};

struct TensorInfo {
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> shape;  // ne[0] first (row length), 1..4 dims
  uint64_t offset = 0;         // relative to the data section
  size_t n_bytes = 0;          // exact size of the tensor's data
  const uint8_t* data = nullptr;  // points into the mapped file
  int64_t n_elements() const;
  int64_t n_rows() const { return shape.empty() ? 0 : n_elements() / shape[0]; }
  // "blk.0.attn_q.weight Q8_0 [128, 128]"
  std::string Describe() const;
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: NotFound, IOError, Corruption
  // (malformed or truncated), NotSupported (version, unknown tensor type).
  static Result<std::unique_ptr<GgufFile>> Open(Env* env, const std::string& path);
  // Same, over bytes the caller keeps alive (used by the fuzzer and tests).
  static Result<std::unique_ptr<GgufFile>> Parse(const uint8_t* data, size_t size,
                                                 std::string name);

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  const uint8_t* file_data() const { return data_; }
  // MappedFile::DropPages for the bytes [p, p + n) of this file (a no-op for
  // a Parse()d one).
  void DropPages(const uint8_t* p, size_t n) const;

  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const Value* Find(std::string_view key) const;
  // Typed getters: NotFound when absent, InvalidArgument naming the key and the
  // expected vs. actual type when the type does not fit. GetInt and the integer
  // arrays take integer types only (not bool) and reject a u64 above INT64_MAX;
  // GetFloat and GetFloatArray also take integers.
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;    // any integer width
  Result<double> GetFloat(std::string_view key) const;   // f32/f64 (or integer)
  Result<bool> GetBool(std::string_view key) const;
  // Integer array, or a scalar integer repeated `n` times (per-layer keys).
  Result<std::vector<int64_t>> GetIntArrayOrScalar(std::string_view key, size_t n) const;
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;
  Result<std::vector<double>> GetFloatArray(std::string_view key) const;  // f32/f64/int elements
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> mapping_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class GgufParser;
};

}  // namespace mx::gguf
