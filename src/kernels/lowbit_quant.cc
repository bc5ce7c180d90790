// Quantizers of the low-bit types that make-model writes (kernels.h
// QuantizeRow). TQ1_0, TQ2_0, Q1_0, Q2_0 and MXFP4 follow ggml's reference
// quantizers (README-quants.md) and write its bytes; Q2_K, Q3_K, IQ4_NL and
// IQ4_XS are plain round-to-nearest ones (ggml searches scales, optionally
// weighted by an importance matrix), like quant.cc's K-quants. The IQ1 /
// IQ2 / IQ3 grid types and NVFP4 have none: ggml needs an importance matrix
// or a grid search for the former, and llama.cpp offers no NVFP4 file type.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/lowbit_tables.h"
#include "kernels/quant_helpers.h"

namespace mx::kernels::internal {
namespace {

inline float RoundTripHalf(float f) { return Fp16ToF32(F32ToFp16(f)); }
inline int Nearest(float v) { return static_cast<int>(std::nearbyintf(v)); }
inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

float AbsMax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

// The index of the table value nearest to v (the first on ties).
int NearestIndex(const int8_t* table, float v) {
  int best = 0;
  float best_err = std::fabs(v - static_cast<float>(table[0]));
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(v - static_cast<float>(table[k]));
    if (err < best_err) {
      best_err = err;
      best = k;
    }
  }
  return best;
}

// ---------------------------------------------------------------- ggml's

// Ternary codes 0..2 (value - 1) of 256 values: d = max |x|, nearest.
void TernaryCodes(const float* x, uint8_t* b_d, uint8_t* t) {
  const float amax = AbsMax(x, 256);
  const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
  PutHalf(b_d, amax);
  for (int j = 0; j < 256; ++j) t[j] = static_cast<uint8_t>(Nearest(x[j] * id) + 1);
}
void QuantTQ2_0(const float* x, uint8_t* b) {
  uint8_t t[256];
  TernaryCodes(x, b + 64, t);
  for (int c = 0; c < 2; ++c)
    for (int m = 0; m < 32; ++m) {
      uint8_t q = 0;
      for (int l = 0; l < 4; ++l)
        q = static_cast<uint8_t>(q | (t[128 * c + 32 * l + m] << (2 * l)));
      b[32 * c + m] = q;
    }
}
// n base-3 digits (the first most significant) as the fixed-point fraction
// TQ1_0 decodes: ceil(v * 256 / 243), v the 5-digit number (4 digits: times 3).
uint8_t PackTernary(const uint8_t* t, int n, int stride) {
  uint32_t v = 0;
  for (int k = 0; k < n; ++k) v = v * 3 + t[k * stride];
  if (n == 4) v *= 3;
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}
void QuantTQ1_0(const float* x, uint8_t* b) {
  uint8_t t[256];
  TernaryCodes(x, b + 52, t);
  for (int m = 0; m < 32; ++m) b[m] = PackTernary(t + m, 5, 32);
  for (int m = 0; m < 16; ++m) b[32 + m] = PackTernary(t + 160 + m, 5, 16);
  for (int j = 0; j < 4; ++j) b[48 + j] = PackTernary(t + 240 + j, 4, 4);
}
void QuantQ1_0(const float* x, uint8_t* b) {
  float sum = 0.0f;
  for (int j = 0; j < 128; ++j) sum += std::fabs(x[j]);
  PutHalf(b, sum / 128.0f);
  std::memset(b + 2, 0, 16);
  for (int j = 0; j < 128; ++j)
    if (x[j] >= 0.0f) b[2 + j / 8] = static_cast<uint8_t>(b[2 + j / 8] | (1 << (j % 8)));
}
void QuantQ2_0(const float* x, uint8_t* b) {
  const float amax = AbsMax(x, 64);
  const float d = RoundTripHalf(amax);
  PutHalf(b, amax);
  std::memset(b + 2, 0, 16);
  for (int j = 0; j < 64; ++j) {
    const int c = d != 0.0f ? Clamp(static_cast<int>(std::roundf(x[j] / d)) + 1, 0, 3) : 1;
    b[2 + j / 4] = static_cast<uint8_t>(b[2 + j / 4] | (c << (2 * (j % 4))));
  }
}
void QuantMXFP4(const float* x, uint8_t* b) {
  const float amax = AbsMax(x, 32);
  const int e =
      amax > 0.0f ? Clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254) : 0;
  b[0] = static_cast<uint8_t>(e);
  // Table values are doubled: x / 2^(e - 127) in E2M1 is 2 x / 2^(e - 127) in
  // the table.
  const float inv = e > 0 ? std::ldexp(1.0f, 128 - e) : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int lo = NearestIndex(kValuesFp4, x[j] * inv);
    const int hi = NearestIndex(kValuesFp4, x[j + 16] * inv);
    b[1 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// ----------------------------------------------------- round to nearest

// Q2_K: per 16 values an affine range (min <= 0) of 4 levels; 4-bit scales
// and mins against the block's d and dmin.
void QuantQ2K(const float* x, uint8_t* b) {
  float scale[16], minv[16], max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float lo = 0.0f, hi = x[16 * s];
    for (int i = 0; i < 16; ++i) {
      lo = std::fmin(lo, x[16 * s + i]);
      hi = std::fmax(hi, x[16 * s + i]);
    }
    scale[s] = (hi - lo) / 3.0f;
    minv[s] = -lo;
    max_scale = std::fmax(max_scale, scale[s]);
    max_min = std::fmax(max_min, minv[s]);
  }
  const float d = RoundTripHalf(max_scale / 15.0f), dmin = RoundTripHalf(max_min / 15.0f);
  std::memset(b + 16, 0, 64);
  for (int s = 0; s < 16; ++s) {
    const int sc = d > 0.0f ? Clamp(Nearest(scale[s] / d), 0, 15) : 0;
    const int m = dmin > 0.0f ? Clamp(Nearest(minv[s] / dmin), 0, 15) : 0;
    b[s] = static_cast<uint8_t>(sc | (m << 4));
    const float ds = d * static_cast<float>(sc), ms = dmin * static_cast<float>(m);
    for (int i = 0; i < 16; ++i) {
      const int v = 16 * s + i;  // = 128 h + 32 j + l
      const int q = ds > 0.0f ? Clamp(Nearest((x[v] + ms) / ds), 0, 3) : 0;
      const int h = v / 128, j = (v % 128) / 32, l = v % 32;
      b[16 + 32 * h + l] = static_cast<uint8_t>(b[16 + 32 * h + l] | (q << (2 * j)));
    }
  }
  PutHalf(b + 80, d);
  PutHalf(b + 82, dmin);
}

// Q3_K: per 16 values a signed scale (the largest magnitude maps to -4),
// 6-bit signed scales against the block's d, values -4..3.
void QuantQ3K(const float* x, uint8_t* b) {
  float scale[16];
  for (int s = 0; s < 16; ++s) scale[s] = SignedAbsMax(x + 16 * s, 16) / -4.0f;
  const float d = RoundTripHalf(SignedAbsMax(scale, 16) / -32.0f);
  std::memset(b, 0, 108);
  for (int s = 0; s < 16; ++s) {
    const int sc = d != 0.0f ? Clamp(Nearest(scale[s] / d), -32, 31) : 0;
    const int u = sc + 32;
    if (s < 8) {
      b[96 + s] = static_cast<uint8_t>(b[96 + s] | (u & 15));
    } else {
      b[96 + s - 8] = static_cast<uint8_t>(b[96 + s - 8] | ((u & 15) << 4));
    }
    b[96 + 8 + s % 4] = static_cast<uint8_t>(b[96 + 8 + s % 4] | ((u >> 4) << (2 * (s / 4))));
    const float ds = d * static_cast<float>(sc);
    for (int i = 0; i < 16; ++i) {
      const int v = 16 * s + i;
      const int q = ds != 0.0f ? Clamp(Nearest(x[v] / ds), -4, 3) : 0;
      const int code = q + 4, h = v / 128, j = (v % 128) / 32, l = v % 32;
      b[32 + 32 * h + l] = static_cast<uint8_t>(b[32 + 32 * h + l] | ((code & 3) << (2 * j)));
      if (code >> 2) b[l] = static_cast<uint8_t>(b[l] | (1 << (4 * h + j)));
    }
  }
  PutHalf(b + 108, d);
}

// 32 values as indices of kValuesIq4nl against the scale ds.
void Iq4Indices(const float* x, float ds, uint8_t* qs) {
  const float id = ds != 0.0f ? 1.0f / ds : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int lo = NearestIndex(kValuesIq4nl, x[j] * id);
    const int hi = NearestIndex(kValuesIq4nl, x[j + 16] * id);
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}
// IQ4_NL: the value of largest magnitude maps to the table's -127.
void QuantIQ4NL(const float* x, uint8_t* b) {
  const float d = RoundTripHalf(SignedAbsMax(x, 32) / -127.0f);
  PutHalf(b, d);
  Iq4Indices(x, d, b + 2);
}
// IQ4_XS: IQ4_NL's scale per 32 values as a 6-bit signed multiple of d.
void QuantIQ4XS(const float* x, uint8_t* b) {
  float scale[8];
  for (int ib = 0; ib < 8; ++ib) scale[ib] = SignedAbsMax(x + 32 * ib, 32) / -127.0f;
  const float d = RoundTripHalf(SignedAbsMax(scale, 8) / -32.0f);
  PutHalf(b, d);
  uint16_t scales_h = 0;
  std::memset(b + 4, 0, 4);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = d != 0.0f ? Clamp(Nearest(scale[ib] / d), -32, 31) : 0;
    const int u = ls + 32;
    b[4 + ib / 2] = static_cast<uint8_t>(b[4 + ib / 2] | ((u & 15) << (4 * (ib % 2))));
    scales_h = static_cast<uint16_t>(scales_h | ((u >> 4) << (2 * ib)));
    Iq4Indices(x + 32 * ib, d * static_cast<float>(ls), b + 8 + 16 * ib);
  }
  std::memcpy(b + 2, &scales_h, 2);
}

}  // namespace

BlockQuantFn LowbitQuantFor(DType type) {
  switch (type) {
    case DType::kQ2_K:
      return QuantQ2K;
    case DType::kQ3_K:
      return QuantQ3K;
    case DType::kIQ4_NL:
      return QuantIQ4NL;
    case DType::kIQ4_XS:
      return QuantIQ4XS;
    case DType::kTQ1_0:
      return QuantTQ1_0;
    case DType::kTQ2_0:
      return QuantTQ2_0;
    case DType::kQ1_0:
      return QuantQ1_0;
    case DType::kQ2_0:
      return QuantQ2_0;
    case DType::kMXFP4:
      return QuantMXFP4;
    default:
      return nullptr;
  }
}

}  // namespace mx::kernels::internal
