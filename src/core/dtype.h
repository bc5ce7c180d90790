// Tensor element types, numbered as ggml numbers them in GGUF files
// (../shared/ENGINE-FACTS.md §1.3), with their block geometry (§2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mx {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct DTypeInfo {
  const char* name;      // "F32", "Q8_0", ...; nullptr for an unknown id
  int64_t block_values;  // values per block (1 for plain types)
  size_t block_bytes;    // bytes per block
};

// Geometry of a ggml type id; name == nullptr when the id is unknown to us.
DTypeInfo GetDTypeInfo(uint32_t type_id);
inline DTypeInfo GetDTypeInfo(DType t) { return GetDTypeInfo(static_cast<uint32_t>(t)); }
// "Q8_0", or "type#<id>" for ids we do not know.
std::string DTypeName(uint32_t type_id);
inline std::string DTypeName(DType t) { return DTypeName(static_cast<uint32_t>(t)); }

// The type named `name` ("Q8_0", "q8_0", "f16": DTypeName's names, any
// case); false when no type has that name.
bool DTypeFromName(std::string_view name, DType* type);
// DTypeName in lower case ("q8_0", "f16"), as settings spell types.
std::string DTypeLowerName(DType t);

// Bytes of one row of n values; 0 when n is not a multiple of the block size
// or the type is unknown.
size_t RowBytes(DType t, int64_t n);

}  // namespace mx
