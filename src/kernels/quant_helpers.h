// Internal: the small steps ggml's reference quantizers share (quant.cc,
// lowbit_quant.cc): an f16 block scale stored little-endian, and the signed
// value of largest magnitude a block's scale is derived from.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace mx::kernels::internal {

inline void PutHalf(uint8_t* p, float f) {
  const uint16_t h = F32ToFp16(f);
  std::memcpy(p, &h, 2);
}

// The signed value of largest magnitude (the first one on ties), as ggml picks it.
inline float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace mx::kernels::internal
