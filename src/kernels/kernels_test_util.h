// Test support shared by the kernel test files: double-precision references
// written from ENGINE-FACTS (block values, llama.cpp's activation rounding),
// random test matrices, and the fixture that runs a test once per
// instruction-set path. Internal linkage: each test file gets its own copy.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

constexpr double kEps32 = 1.0 / 16777216.0;  // 2^-24

inline std::vector<float> RandomVec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// A test run once on every kernel path this CPU has (SetActiveIsa), the
// fastest path active again afterwards.
class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SetActiveIsa(GetParam())); }
  void TearDown() override { SetActiveIsa(AvailableIsas().back()); }
};
inline std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) { return IsaName(info.param); }

// ------------------------------------------------- test-side dequantization
// Straight from the element-index formulas of ENGINE-FACTS §2, in double.

inline double H(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToF32(h);
}
inline int Lo(uint8_t b) { return b & 15; }
inline int Hi(uint8_t b) { return b >> 4; }

inline void KScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = Lo(s[j + 4]) | ((s[j - 4] >> 6) << 4);
    *m = Hi(s[j + 4]) | ((s[j] >> 6) << 4);
  }
}

// Value e of one block of `type`.
inline double RefBlockValue(DType type, const uint8_t* b, int e) {
  switch (type) {
    case DType::kQ4_0: {
      const int q = e < 16 ? Lo(b[2 + e]) : Hi(b[2 + e - 16]);
      return H(b) * (q - 8);
    }
    case DType::kQ4_1: {
      const int q = e < 16 ? Lo(b[4 + e]) : Hi(b[4 + e - 16]);
      return H(b) * q + H(b + 2);
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool one = type == DType::kQ5_1;
      uint32_t qh;
      std::memcpy(&qh, b + (one ? 4 : 2), 4);
      const uint8_t* qs = b + (one ? 8 : 6);
      const int q = (e < 16 ? Lo(qs[e]) : Hi(qs[e - 16])) + 16 * static_cast<int>((qh >> e) & 1);
      return one ? H(b) * q + H(b + 2) : H(b) * (q - 16);
    }
    case DType::kQ8_0:
      return H(b) * static_cast<int8_t>(b[2 + e]);
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = type == DType::kQ5_K;
      const uint8_t* qs = b + (five ? 48 : 16);
      const int c = e / 64, l = e % 32;
      int q = e % 64 < 32 ? Lo(qs[32 * c + l]) : Hi(qs[32 * c + l]);
      if (five) q += 16 * ((b[16 + l] >> (e / 32)) & 1);
      int sc, m;
      KScaleMin(b + 4, e / 32, &sc, &m);
      return H(b) * sc * q - H(b + 2) * m;
    }
    case DType::kQ6_K: {
      const int n = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lb = b[64 * n + l + 32 * (k & 1)];
      const int low = k < 2 ? Lo(lb) : Hi(lb);
      const int high = (b[128 + 32 * n + l] >> (2 * k)) & 3;
      return H(b + 208) * static_cast<int8_t>(b[192 + e / 16]) * ((low | (high << 4)) - 32);
    }
    default:
      return NAN;
  }
}

// |each product term| of value e, for the error bound: K-quants' two terms
// (d * sc * q and dmin * m) separately, other types the value itself.
inline double RefTermMagnitude(DType type, const uint8_t* b, int e) {
  if (type == DType::kQ4_1 || type == DType::kQ5_1) {
    return std::fabs(RefBlockValue(type, b, e) - H(b + 2)) + std::fabs(H(b + 2));
  }
  if (type != DType::kQ4_K && type != DType::kQ5_K) return std::fabs(RefBlockValue(type, b, e));
  int sc, m;
  KScaleMin(b + 4, e / 32, &sc, &m);
  return std::fabs(RefBlockValue(type, b, e) + H(b + 2) * m) + std::fabs(H(b + 2) * m);
}

// llama.cpp's Q8_K activation rounding (quantize_row_q8_K_ref), dequantized:
// per 256 values, iscale = -127 / (first value of largest magnitude), q =
// min(127, nearest-even(iscale * x)), value = q / iscale.
inline std::vector<double> RefQ8K(const float* x, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  for (int64_t b = 0; b < n; b += 256) {
    float amax = 0, max = 0;
    for (int64_t i = b; i < b + 256; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    if (amax == 0) continue;
    const float iscale = -127.f / max, d = 1 / iscale;
    for (int64_t i = b; i < b + 256; ++i) {
      const int q = std::min(127, static_cast<int>(std::nearbyint(iscale * x[i])));
      out[static_cast<size_t>(i)] = static_cast<double>(d) * q;
    }
  }
  return out;
}

// llama.cpp's x86 quantize_row_q8_0 (the 32-value types' activations),
// dequantized: per 32 values a = max |x|, d = fp16(a / 127), q =
// nearest-even(x * (127 / a)), value = d * q.
inline std::vector<double> RefQ8_32(const float* x, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  for (int64_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const double d = Fp16ToF32(F32ToFp16(amax / 127.f));
    const float id = amax != 0 ? 127.f / amax : 0.f;
    for (int64_t i = b; i < b + 32; ++i)
      out[static_cast<size_t>(i)] = d * static_cast<int>(std::nearbyint(x[i] * id));
  }
  return out;
}

inline std::vector<double> RefDequant(DType type, const uint8_t* src, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  const DTypeInfo info = GetDTypeInfo(type);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h = 0;
    if (type == DType::kF32) {
      float f;
      std::memcpy(&f, src + 4 * i, 4);
      out[static_cast<size_t>(i)] = f;
    } else if (type == DType::kF16 || type == DType::kBF16) {
      std::memcpy(&h, src + 2 * i, 2);
      out[static_cast<size_t>(i)] = type == DType::kF16 ? Fp16ToF32(h) : Bf16ToF32(h);
    } else {
      const int64_t blk = i / info.block_values;
      out[static_cast<size_t>(i)] = RefBlockValue(type, src + blk * info.block_bytes,
                                                  static_cast<int>(i % info.block_values));
    }
  }
  return out;
}

inline const std::vector<DType>& AllWeightTypes() {
  static const std::vector<DType> types = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                           DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  return types;
}
inline bool IsKQuant(DType t) { return GetDTypeInfo(t).block_values == 256; }

// A weight matrix of `type` quantized from random values, with its
// dequantized values (test-side reference, double).
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<double> deq;  // [n_rows * n_cols]
  std::vector<double> mag;  // [n_rows * n_cols] RefTermMagnitude
  Matrix m;
};
inline TestMatrix MakeMatrix(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  TestMatrix tm;
  const size_t row_bytes = RowBytes(type, n_cols);
  tm.bytes.resize(row_bytes * static_cast<size_t>(n_rows));
  const std::vector<float> src = RandomVec(n_rows * n_cols, seed, 0.5f);
  for (int64_t r = 0; r < n_rows; ++r) {
    QuantizeRow(type, &src[static_cast<size_t>(r * n_cols)], tm.bytes.data() + r * row_bytes,
                n_cols);
  }
  tm.deq = RefDequant(type, tm.bytes.data(), n_rows * n_cols);
  tm.mag.resize(tm.deq.size());
  const DTypeInfo info = GetDTypeInfo(type);
  for (size_t i = 0; i < tm.mag.size(); ++i) {
    if (info.block_values == 1) {
      tm.mag[i] = std::fabs(tm.deq[i]);
      continue;
    }
    const int64_t r = static_cast<int64_t>(i) / n_cols, k = static_cast<int64_t>(i) % n_cols;
    tm.mag[i] = RefTermMagnitude(
        type, tm.bytes.data() + r * row_bytes + (k / info.block_values) * info.block_bytes,
        static_cast<int>(k % info.block_values));
  }
  tm.m = Matrix{type, tm.bytes.data(), n_cols, n_rows, row_bytes};
  return tm;
}

// ------------------------------------------------------------- fixtures

class PathTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SetActiveIsa(GetParam())); }
  void TearDown() override { SetActiveIsa(AvailableIsas().back()); }
};
inline std::string PathName(const ::testing::TestParamInfo<Isa>& info) {
  return IsaName(info.param);
}

#define MX_PATH_SUITE(suite) \
  INSTANTIATE_TEST_SUITE_P(Paths, suite, ::testing::ValuesIn(AvailableIsas()), PathName)

// n values of `type` as random bytes (every bit of the layout, not just
// quantizer output), with the fp16 scale fields kept finite (their
// exponent's top bit cleared); float types get real values (no NaN patterns).
inline std::vector<uint8_t> RandomBlockBytes(DType type, int64_t n, uint32_t seed) {
  std::vector<uint8_t> bytes(RowBytes(type, n));
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  if (type == DType::kF32 || type == DType::kF16 || type == DType::kBF16) {
    const std::vector<float> v = RandomVec(n, seed + 1);
    QuantizeRow(type, v.data(), bytes.data(), n);
    return bytes;
  }
  const DTypeInfo info = GetDTypeInfo(type);
  std::vector<int> scale_offsets;
  if (type == DType::kQ6_K)
    scale_offsets = {208};
  else if (IsKQuant(type))
    scale_offsets = {0, 2};
  else if (type == DType::kQ4_1 || type == DType::kQ5_1)
    scale_offsets = {0, 2};
  else
    scale_offsets = {0};
  for (size_t b = 0; b < bytes.size(); b += info.block_bytes) {
    for (int off : scale_offsets) bytes[b + static_cast<size_t>(off) + 1] &= 0x3F;
  }
  return bytes;
}

// Rigorous-enough bound for an f32 dot product of n terms summed in lanes of
// at least 8: (n/8 + 16) roundings of at most 2^-24 of sum |w x|, plus one
// rounding per weight for formulas with an f32 add (K-quants, Q4_1, Q5_1).
// True when MatMul on the active path rounds this weight type's activations
// to bf16 (kernels.h: BF16 on amx).
inline bool RoundsBf16Activations(DType type) {
  return type == DType::kBF16 && Bf16ActivationsRounded();
}
inline std::vector<double> RoundedToBf16(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16ToF32(F32ToBf16(static_cast<float>(x[i])));
  return out;
}

inline double DotTolerance(int64_t n, double abs_sum) {
  return (static_cast<double>(n) / 8 + 20) * kEps32 * abs_sum;
}

// y of n_tokens computed as separate calls of `chunk` tokens each.
inline std::vector<float> MatMulChunked(const Matrix& m, const std::vector<float>& x,
                                        int64_t n_tokens, int64_t chunk, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(n_tokens * m.n_rows));
  for (int64_t t = 0; t < n_tokens; t += chunk) {
    const int64_t n = std::min(chunk, n_tokens - t);
    MatMul(m, &x[static_cast<size_t>(t * m.n_cols)], m.n_cols, n,
           &y[static_cast<size_t>(t * m.n_rows)], m.n_rows, pool);
  }
  return y;
}

}  // namespace
}  // namespace mx::kernels
