// Scalar IEEE binary16 and bfloat16 conversions (ENGINE-FACTS §2): f32 -> f16
// and f32 -> bf16 round to nearest even; widening is exact. SIMD versions live
// in kernels/; these are the reference they are tested against.
#pragma once

#include <cstdint>
#include <cstring>

namespace mx {

inline uint32_t F32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float F32FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float Fp16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return F32FromBits(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return F32FromBits(sign | 0x7f800000u | (mant << 13));
  return F32FromBits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t F32ToFp16(float f) {
  uint32_t x = F32Bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to Inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): round abs * 2^24 to an integer, ties to even.
    float v = F32FromBits(abs) * 16777216.0f;  // exact scaling by a power of two
    // v < 1024; nearbyint-style rounding with ties to even via the magic-add trick.
    float r = (v + 8388608.0f) - 8388608.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  uint32_t exp = (abs >> 23) - 112;
  uint32_t mant = abs & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into exp correctly
  return static_cast<uint16_t>(sign | h);
}

inline float Bf16ToF32(uint16_t b) { return F32FromBits(static_cast<uint32_t>(b) << 16); }

inline uint16_t F32ToBf16(float f) {
  uint32_t x = F32Bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace mx
