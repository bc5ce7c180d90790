#include "core/dtype.h"

#include <cctype>

namespace mx {

DTypeInfo GetDTypeInfo(uint32_t type_id) {
  switch (static_cast<DType>(type_id)) {
    case DType::kF32: return {"F32", 1, 4};
    case DType::kF16: return {"F16", 1, 2};
    case DType::kBF16: return {"BF16", 1, 2};
    case DType::kQ4_0: return {"Q4_0", 32, 18};
    case DType::kQ4_1: return {"Q4_1", 32, 20};
    case DType::kQ5_0: return {"Q5_0", 32, 22};
    case DType::kQ5_1: return {"Q5_1", 32, 24};
    case DType::kQ8_0: return {"Q8_0", 32, 34};
    case DType::kQ8_1: return {"Q8_1", 32, 36};
    case DType::kQ2_K: return {"Q2_K", 256, 84};
    case DType::kQ3_K: return {"Q3_K", 256, 110};
    case DType::kQ4_K: return {"Q4_K", 256, 144};
    case DType::kQ5_K: return {"Q5_K", 256, 176};
    case DType::kQ6_K: return {"Q6_K", 256, 210};
    case DType::kQ8_K: return {"Q8_K", 256, 292};
    case DType::kIQ2_XXS: return {"IQ2_XXS", 256, 66};
    case DType::kIQ2_XS: return {"IQ2_XS", 256, 74};
    case DType::kIQ3_XXS: return {"IQ3_XXS", 256, 98};
    case DType::kIQ1_S: return {"IQ1_S", 256, 50};
    case DType::kIQ4_NL: return {"IQ4_NL", 32, 18};
    case DType::kIQ3_S: return {"IQ3_S", 256, 110};
    case DType::kIQ2_S: return {"IQ2_S", 256, 82};
    case DType::kIQ4_XS: return {"IQ4_XS", 256, 136};
    case DType::kIQ1_M: return {"IQ1_M", 256, 56};
    case DType::kTQ1_0: return {"TQ1_0", 256, 54};
    case DType::kTQ2_0: return {"TQ2_0", 256, 66};
    case DType::kMXFP4: return {"MXFP4", 32, 17};
    case DType::kNVFP4: return {"NVFP4", 64, 36};
    case DType::kQ1_0: return {"Q1_0", 128, 18};
    case DType::kQ2_0: return {"Q2_0", 64, 18};
    case DType::kI8: return {"I8", 1, 1};
    case DType::kI16: return {"I16", 1, 2};
    case DType::kI32: return {"I32", 1, 4};
    case DType::kI64: return {"I64", 1, 8};
    case DType::kF64: return {"F64", 1, 8};
  }
  return {nullptr, 0, 0};
}

std::string DTypeName(uint32_t type_id) {
  DTypeInfo info = GetDTypeInfo(type_id);
  if (info.name == nullptr) return "type#" + std::to_string(type_id);
  return info.name;
}

bool DTypeFromName(std::string_view name, DType* type) {
  for (uint32_t id = 0; id < 64; ++id) {
    const DTypeInfo info = GetDTypeInfo(id);
    if (info.name == nullptr || std::string_view(info.name).size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(name[i])) ==
             std::tolower(static_cast<unsigned char>(info.name[i]));
    }
    if (same) {
      *type = static_cast<DType>(id);
      return true;
    }
  }
  return false;
}

std::string DTypeLowerName(DType t) {
  std::string s = DTypeName(t);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t RowBytes(DType t, int64_t n) {
  DTypeInfo info = GetDTypeInfo(t);
  if (info.name == nullptr || n < 0 || n % info.block_values != 0) return 0;
  return static_cast<size_t>(n / info.block_values) * info.block_bytes;
}

}  // namespace mx
