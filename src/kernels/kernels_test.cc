// Kernel tests. Every test that takes a path runs once per instruction-set
// path this CPU has (scalar, avx2, avx512), forced with SetActiveIsa, against
// straightforward double-precision references written from ENGINE-FACTS
// (independently of quant.cc). Batch-invariance tests compare bytes.
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace mx::kernels {
namespace {

constexpr double kEps32 = 1.0 / 16777216.0;  // 2^-24

std::vector<float> RandomVec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// ------------------------------------------------- test-side dequantization
// Straight from the element-index formulas of ENGINE-FACTS §2, in double.

double H(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToF32(h);
}
int Lo(uint8_t b) { return b & 15; }
int Hi(uint8_t b) { return b >> 4; }

void KScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = Lo(s[j + 4]) | ((s[j - 4] >> 6) << 4);
    *m = Hi(s[j + 4]) | ((s[j] >> 6) << 4);
  }
}

// Value e of one block of `type`.
double RefBlockValue(DType type, const uint8_t* b, int e) {
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
double RefTermMagnitude(DType type, const uint8_t* b, int e) {
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
std::vector<double> RefQ8K(const float* x, int64_t n) {
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
std::vector<double> RefQ8_32(const float* x, int64_t n) {
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

std::vector<double> RefDequant(DType type, const uint8_t* src, int64_t n) {
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

const std::vector<DType>& AllWeightTypes() {
  static const std::vector<DType> types = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                           DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  return types;
}
bool IsKQuant(DType t) { return GetDTypeInfo(t).block_values == 256; }

// A weight matrix of `type` quantized from random values, with its
// dequantized values (test-side reference, double).
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<double> deq;  // [n_rows * n_cols]
  std::vector<double> mag;  // [n_rows * n_cols] RefTermMagnitude
  Matrix m;
};
TestMatrix MakeMatrix(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
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
std::string PathName(const ::testing::TestParamInfo<Isa>& info) { return IsaName(info.param); }

#define MX_PATH_SUITE(suite) \
  INSTANTIATE_TEST_SUITE_P(Paths, suite, ::testing::ValuesIn(AvailableIsas()), PathName)

// ---------------------------------------------------------------- dispatch

TEST(DispatchTest, NamesRoundTripAndScalarIsAlwaysThere) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    Isa parsed;
    ASSERT_TRUE(IsaFromName(IsaName(isa), &parsed));
    EXPECT_EQ(parsed, isa);
  }
  Isa parsed;
  EXPECT_FALSE(IsaFromName("sse9", &parsed));
  const std::vector<Isa> paths = AvailableIsas();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), Isa::kScalar);
}

TEST(DispatchTest, SettingPicksNamedPathOrFallsBackToBest) {
  const Isa best = AvailableIsas().back();
  EXPECT_EQ(IsaForSetting(""), best);
  EXPECT_EQ(IsaForSetting("bogus"), best);
  EXPECT_EQ(IsaForSetting("AVX2"), best);  // names are lower case
  for (Isa isa : AvailableIsas()) EXPECT_EQ(IsaForSetting(IsaName(isa)), isa);
}

TEST(DispatchTest, SetActiveIsaSwitchesPath) {
  for (Isa isa : AvailableIsas()) {
    ASSERT_TRUE(SetActiveIsa(isa));
    EXPECT_EQ(ActiveIsa(), isa);
  }
}

// ---------------------------------------------------- (de)quantization

class QuantTest : public PathTest {};
MX_PATH_SUITE(QuantTest);

// n values of `type` as random bytes (every bit of the layout, not just
// quantizer output), with the fp16 scale fields kept finite (their
// exponent's top bit cleared); float types get real values (no NaN patterns).
std::vector<uint8_t> RandomBlockBytes(DType type, int64_t n, uint32_t seed) {
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

TEST_P(QuantTest, DequantizeMatchesElementFormulas) {
  for (DType type : AllWeightTypes()) {
    SCOPED_TRACE(DTypeName(type));
    const int64_t n = 512;
    const std::vector<uint8_t> bytes = RandomBlockBytes(type, n, 7);
    std::vector<float> got(static_cast<size_t>(n));
    DequantizeRow(type, bytes.data(), got.data(), n);
    const std::vector<double> ref = RefDequant(type, bytes.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // f32 evaluation of the same formula: exact, or one rounding (K-quants, Q4_1/Q5_1).
      ASSERT_NEAR(got[static_cast<size_t>(i)], ref[static_cast<size_t>(i)],
                  4 * kEps32 * (std::fabs(ref[static_cast<size_t>(i)]) + 1e-30) + 1e-12)
          << "element " << i;
    }
  }
}

TEST_P(QuantTest, F16AndBF16RoundTripIsRne) {
  std::vector<float> v = RandomVec(1000, 3);
  v.push_back(65504.0f);
  v.push_back(1e-7f);  // fp16 subnormal
  v.push_back(-3e-8f);
  v.push_back(1.0f + 1.0f / 2048);  // halfway between two halfs: ties to even
  v.push_back(1.0f + 3.0f / 2048);
  for (DType type : {DType::kF16, DType::kBF16}) {
    const int64_t n = static_cast<int64_t>(v.size());
    std::vector<uint8_t> bytes(RowBytes(type, n));
    QuantizeRow(type, v.data(), bytes.data(), n);
    std::vector<float> back(v.size());
    DequantizeRow(type, bytes.data(), back.data(), n);
    for (size_t i = 0; i < v.size(); ++i) {
      const float want =
          type == DType::kF16 ? Fp16ToF32(F32ToFp16(v[i])) : Bf16ToF32(F32ToBf16(v[i]));
      ASSERT_EQ(F32Bits(back[i]), F32Bits(want)) << DTypeName(type) << " element " << i;
    }
  }
}

TEST_P(QuantTest, Q8_0RoundTripWithinHalfStep) {
  const int64_t n = 4096;
  const std::vector<float> v = RandomVec(n, 11, 3.0f);
  std::vector<uint8_t> bytes(RowBytes(DType::kQ8_0, n));
  QuantizeRow(DType::kQ8_0, v.data(), bytes.data(), n);
  std::vector<float> back(static_cast<size_t>(n));
  DequantizeRow(DType::kQ8_0, bytes.data(), back.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j)
      amax = std::max(amax, std::fabs(v[static_cast<size_t>(b * 32 + j)]));
    const double d = amax / 127.0;  // before fp16 rounding
    const double d16 = H(bytes.data() + b * 34);
    // q = round(x / d) is within d/2 of x / d; storing d in fp16 moves q * d by
    // at most 127 |d - d16|.
    const double bound = d / 2 + 127 * std::fabs(d - d16) + 1e-6 * amax;
    for (int j = 0; j < 32; ++j) {
      const size_t i = static_cast<size_t>(b * 32 + j);
      ASSERT_LE(std::fabs(back[i] - v[i]), bound) << "element " << i;
    }
  }
}

TEST(QuantRefTest, Q8_0RoundsHalfAwayFromZeroLikeGgml) {
  std::vector<float> v(32, 0.0f);
  v[0] = 127.0f;  // d = 1 exactly
  v[1] = 2.5f;
  v[2] = -2.5f;
  v[3] = 0.49f;
  uint8_t b[34];
  QuantizeRow(DType::kQ8_0, v.data(), b, 32);
  EXPECT_EQ(b[0] | (b[1] << 8), 0x3C00);  // fp16 1.0
  EXPECT_EQ(static_cast<int8_t>(b[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(b[3]), 3);
  EXPECT_EQ(static_cast<int8_t>(b[4]), -3);
  EXPECT_EQ(static_cast<int8_t>(b[5]), 0);
}

TEST_P(QuantTest, LowBitQuantizersRoundTripWithinTheirStep) {
  // Worst-case error relative to the block's largest magnitude, per type:
  // about one quantization step (clamping at the range ends and the 6-bit
  // scales of K-quants included).
  const struct {
    DType type;
    double max_rel;
    double rms_rel;
  } cases[] = {{DType::kQ4_0, 1.0 / 7, 1.0 / 20},  {DType::kQ4_1, 1.0 / 13, 1.0 / 25},
               {DType::kQ5_0, 1.0 / 15, 1.0 / 40}, {DType::kQ5_1, 1.0 / 27, 1.0 / 50},
               {DType::kQ4_K, 1.0 / 7, 1.0 / 25},  {DType::kQ5_K, 1.0 / 14, 1.0 / 50},
               {DType::kQ6_K, 1.0 / 25, 1.0 / 80}};
  for (const auto& c : cases) {
    SCOPED_TRACE(DTypeName(c.type));
    const int64_t n = 2048;
    const std::vector<float> v = RandomVec(n, 5);
    std::vector<uint8_t> bytes(RowBytes(c.type, n));
    ASSERT_TRUE(QuantizeSupported(c.type));
    QuantizeRow(c.type, v.data(), bytes.data(), n);
    std::vector<float> back(static_cast<size_t>(n));
    DequantizeRow(c.type, bytes.data(), back.data(), n);
    const int64_t bv = GetDTypeInfo(c.type).block_values;
    double err2 = 0, amax2 = 0;
    for (int64_t b = 0; b < n / bv; ++b) {
      double amax = 0;
      for (int64_t j = 0; j < bv; ++j)
        amax = std::max(amax, std::fabs(double{v[static_cast<size_t>(b * bv + j)]}));
      for (int64_t j = 0; j < bv; ++j) {
        const size_t i = static_cast<size_t>(b * bv + j);
        const double e = std::fabs(double{back[i]} - v[i]);
        ASSERT_LE(e, c.max_rel * amax) << "element " << i;
        err2 += e * e;
        amax2 += amax * amax;
      }
    }
    EXPECT_LE(std::sqrt(err2 / amax2), c.rms_rel);
  }
}

// ---------------------------------------------------------------- matmul

struct Shape {
  int64_t n_cols, n_rows, n_tokens;
};

// Rigorous-enough bound for an f32 dot product of n terms summed in lanes of
// at least 8: (n/8 + 16) roundings of at most 2^-24 of sum |w x|, plus one
// rounding per weight for formulas with an f32 add (K-quants, Q4_1, Q5_1).
double DotTolerance(int64_t n, double abs_sum) {
  return (static_cast<double>(n) / 8 + 20) * kEps32 * abs_sum;
}

class MatMulTest : public PathTest {};
MX_PATH_SUITE(MatMulTest);

void CheckMatMulAgainstReference(DType type, const Shape& s, ThreadPool* pool) {
  SCOPED_TRACE(DTypeName(type) + " cols " + std::to_string(s.n_cols) + " rows " +
               std::to_string(s.n_rows) + " tokens " + std::to_string(s.n_tokens));
  const TestMatrix tm =
      MakeMatrix(type, s.n_rows, s.n_cols, static_cast<uint32_t>(s.n_cols * 31 + s.n_rows));
  const int64_t ldx = s.n_cols + 3, ldy = s.n_rows + 5;
  const std::vector<float> x = RandomVec(s.n_tokens * ldx, 99);
  std::vector<float> y(static_cast<size_t>(s.n_tokens * ldy), -7.0f);
  MatMul(tm.m, x.data(), ldx, s.n_tokens, y.data(), ldy, pool);
  // Quantized weights read Q8_K / Q8_0-rounded activations (kernels.h);
  // their block sums are exact integers, then each block adds a few f32
  // roundings.
  const int64_t block = GetDTypeInfo(type).block_values;
  const bool integer = block > 1;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    std::vector<double> xt(&x[static_cast<size_t>(t * ldx)],
                           &x[static_cast<size_t>(t * ldx + s.n_cols)]);
    if (block == 256) xt = RefQ8K(&x[static_cast<size_t>(t * ldx)], s.n_cols);
    if (block == 32) xt = RefQ8_32(&x[static_cast<size_t>(t * ldx)], s.n_cols);
    for (int64_t r = 0; r < s.n_rows; ++r) {
      double ref = 0, abs_sum = 0;
      for (int64_t k = 0; k < s.n_cols; ++k) {
        const size_t i = static_cast<size_t>(r * s.n_cols + k);
        ref += tm.deq[i] * xt[static_cast<size_t>(k)];
        abs_sum += tm.mag[i] * std::fabs(xt[static_cast<size_t>(k)]);
      }
      const double tol =
          integer ? (4.0 * static_cast<double>(s.n_cols / block) + 4) * kEps32 * abs_sum
                  : DotTolerance(s.n_cols, abs_sum);
      ASSERT_NEAR(y[static_cast<size_t>(t * ldy + r)], ref, tol) << "token " << t << " row " << r;
    }
    // Padding between rows of y is untouched.
    for (int64_t r = s.n_rows; r < ldy; ++r) ASSERT_EQ(y[static_cast<size_t>(t * ldy + r)], -7.0f);
  }
}

TEST_P(MatMulTest, FloatTypesMatchDoubleReference) {
  ThreadPool pool(2);
  const Shape shapes[] = {{32, 1, 1},    {37, 5, 3},     {100, 17, 7}, {129, 9, 37},
                          {576, 257, 6}, {1000, 33, 13}, {4096, 3, 2}, {64, 64, 5}};
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) CheckMatMulAgainstReference(type, s, &pool);
  }
}

TEST_P(MatMulTest, BlockTypesMatchDoubleReference) {
  ThreadPool pool(2);
  const Shape shapes[] = {{32, 1, 1},   {96, 7, 3},   {256, 257, 37},
                          {512, 13, 5}, {4096, 5, 2}, {768, 40, 9}};
  for (DType type : AllWeightTypes()) {
    if (type == DType::kF32 || type == DType::kF16 || type == DType::kBF16) continue;
    for (const Shape& s : shapes) {
      if (s.n_cols % GetDTypeInfo(type).block_values != 0) continue;
      CheckMatMulAgainstReference(type, s, &pool);
    }
  }
}

TEST_P(MatMulTest, NoPoolAndLargeBatch) {
  CheckMatMulAgainstReference(DType::kF32, {200, 70, 300}, nullptr);
  CheckMatMulAgainstReference(DType::kQ8_0, {256, 70, 200}, nullptr);
}

// y of n_tokens computed as separate calls of `chunk` tokens each.
std::vector<float> MatMulChunked(const Matrix& m, const std::vector<float>& x, int64_t n_tokens,
                                 int64_t chunk, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(n_tokens * m.n_rows));
  for (int64_t t = 0; t < n_tokens; t += chunk) {
    const int64_t n = std::min(chunk, n_tokens - t);
    MatMul(m, &x[static_cast<size_t>(t * m.n_cols)], m.n_cols, n,
           &y[static_cast<size_t>(t * m.n_rows)], m.n_rows, pool);
  }
  return y;
}

TEST_P(MatMulTest, BatchInvariantBitForBit) {
  ThreadPool pool2(2), pool3(3);
  const int64_t n_tokens = 37, n_rows = 67;
  for (DType type : AllWeightTypes()) {
    // A column count with a vector tail where the type allows it.
    const int64_t n_cols =
        IsKQuant(type) ? 512 : (GetDTypeInfo(type).block_values == 32 ? 160 : 203);
    SCOPED_TRACE(DTypeName(type));
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 17);
    const std::vector<float> x = RandomVec(n_tokens * n_cols, 18);
    const std::vector<float> all = MatMulChunked(tm.m, x, n_tokens, n_tokens, nullptr);
    const auto same = [&](const std::vector<float>& y, const char* what) {
      EXPECT_EQ(0, std::memcmp(all.data(), y.data(), all.size() * sizeof(float))) << what;
    };
    same(MatMulChunked(tm.m, x, n_tokens, 1, nullptr), "one token per call");
    same(MatMulChunked(tm.m, x, n_tokens, 2, nullptr), "chunks of 2");
    same(MatMulChunked(tm.m, x, n_tokens, 3, nullptr), "chunks of 3");
    same(MatMulChunked(tm.m, x, n_tokens, 5, nullptr), "chunks of 5");
    same(MatMulChunked(tm.m, x, n_tokens, 1, &pool2), "one token per call, 2 threads");
    same(MatMulChunked(tm.m, x, n_tokens, 5, &pool3), "chunks of 5, 3 threads");
    same(MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool2), "all at once, 2 threads");
    same(MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool3), "all at once, 3 threads");
    // Fewer rows per call (a row slice of the same weights) gives the same values.
    Matrix upper = tm.m;
    upper.n_rows = 13;
    std::vector<float> y13(static_cast<size_t>(n_tokens * 13));
    MatMul(upper, x.data(), n_cols, n_tokens, y13.data(), 13, &pool2);
    for (int64_t t = 0; t < n_tokens; ++t) {
      ASSERT_EQ(0, std::memcmp(&y13[static_cast<size_t>(t * 13)],
                               &all[static_cast<size_t>(t * n_rows)], 13 * 4))
          << "row slice, token " << t;
    }
  }
}

TEST_P(MatMulTest, BatchInvariantForLongPrompts) {
  // Above the per-task token block, with many row blocks and threads.
  // Every weight type: decode sizes run the fused (direct) kernels, long
  // prompts the f32 panels; both must give the same bits.
  ThreadPool pool(3);
  for (DType type : AllWeightTypes()) {
    SCOPED_TRACE(DTypeName(type));
    const int64_t n_tokens = 200, n_rows = 150, n_cols = 512;
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 21);
    const std::vector<float> x = RandomVec(n_tokens * n_cols, 22);
    const std::vector<float> all = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
    const std::vector<float> one = MatMulChunked(tm.m, x, n_tokens, 1, nullptr);
    const std::vector<float> c7 = MatMulChunked(tm.m, x, n_tokens, 7, &pool);
    EXPECT_EQ(0, std::memcmp(all.data(), one.data(), all.size() * 4));
    EXPECT_EQ(0, std::memcmp(all.data(), c7.data(), all.size() * 4));
  }
}

TEST_P(MatMulTest, GroupedProductsEqualSeparateOnes) {
  // MatMuls over five jobs (more than one group) of mixed types and token
  // counts gives each job exactly MatMul's bits.
  ThreadPool pool(2);
  const DType types[] = {DType::kQ8_0, DType::kQ4_K, DType::kF16, DType::kQ5_0, DType::kQ6_K};
  const int64_t n_cols = 512;
  std::vector<TestMatrix> ms;
  std::vector<std::vector<float>> xs, grouped, single;
  std::vector<MatMulJob> jobs;
  for (int i = 0; i < 5; ++i) {
    const int64_t n_tokens = i % 2 == 0 ? 1 : 9, n_rows = 40 + 8 * i;
    ms.push_back(MakeMatrix(types[i], n_rows, n_cols, 40 + i));
    xs.push_back(RandomVec(n_tokens * n_cols, 50 + i));
    grouped.emplace_back(static_cast<size_t>(n_tokens * n_rows));
    single.emplace_back(static_cast<size_t>(n_tokens * n_rows));
  }
  for (int i = 0; i < 5; ++i) {
    const int64_t n_tokens = i % 2 == 0 ? 1 : 9;
    jobs.push_back({ms[i].m, xs[i].data(), n_cols, n_tokens, grouped[i].data(), ms[i].m.n_rows});
    MatMul(ms[i].m, xs[i].data(), n_cols, n_tokens, single[i].data(), ms[i].m.n_rows, nullptr);
  }
  MatMuls(jobs, &pool);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(0, std::memcmp(grouped[i].data(), single[i].data(), grouped[i].size() * 4))
        << "job " << i;
  }
}

TEST_P(MatMulTest, SharedInputsAreQuantizedOnceForAllJobs) {
  // Q, K, V-like jobs reading one input (quantized once to Q8K and shared)
  // give each job exactly MatMul's bits, decode- and prompt-sized.
  ThreadPool pool(2);
  // Two activation kinds (Q8_K, Q8_0 blocks) from one input in one call.
  const DType types[] = {DType::kQ4_K, DType::kQ8_0, DType::kQ6_K, DType::kQ5_1};
  const int64_t n_cols = 768;
  std::vector<TestMatrix> ms;
  for (int i = 0; i < 4; ++i) ms.push_back(MakeMatrix(types[i], 24 + 8 * i, n_cols, 60 + i));
  for (int64_t n_tokens : {1, 5, 130}) {
    SCOPED_TRACE(n_tokens);
    const std::vector<float> x = RandomVec(n_tokens * n_cols, 70);
    std::vector<std::vector<float>> grouped, single;
    std::vector<MatMulJob> jobs;
    for (int i = 0; i < 4; ++i) {
      grouped.emplace_back(static_cast<size_t>(n_tokens * ms[i].m.n_rows));
      single.emplace_back(static_cast<size_t>(n_tokens * ms[i].m.n_rows));
      MatMul(ms[i].m, x.data(), n_cols, n_tokens, single[i].data(), ms[i].m.n_rows, nullptr);
    }
    for (int i = 0; i < 4; ++i)
      jobs.push_back({ms[i].m, x.data(), n_cols, n_tokens, grouped[i].data(), ms[i].m.n_rows});
    MatMuls(jobs, &pool);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(0, std::memcmp(grouped[i].data(), single[i].data(), grouped[i].size() * 4))
          << "job " << i;
    }
  }
}

// Q8_K activation rounding: every path writes QuantizeQ8KRef's bytes, and
// those are llama.cpp's (RefQ8K), including ties, zeros and NaN.
TEST(Q8KTest, PathsWriteTheReferenceBytes) {
  std::vector<float> x = RandomVec(256 * 6, 80, 3.0f);
  for (int i = 0; i < 256; ++i) x[256 + i] = 0.0f;  // block 1: all zero
  x[512 + 3] = 9.0f;                                  // block 2: +9 first, -9 later: +9 wins
  x[512 + 200] = -9.0f;
  x[768 + 10] = -9.0f;                                // block 3: -9 first, +9 later: -9 wins
  x[768 + 11] = 9.0f;
  x[1024 + 5] = std::numeric_limits<float>::quiet_NaN();  // block 4: a NaN never wins
  x[1280 + 7] = 1e-30f;                                   // block 5: one tiny value
  for (int i = 0; i < 256; ++i)
    if (i != 7) x[1280 + i] = 0.0f;
  std::vector<internal::Q8KBlock> ref(6), got(6);
  internal::QuantizeQ8KRef(x.data(), 256 * 6, ref.data());
  const std::vector<double> want = RefQ8K(x.data(), 256 * 6);
  for (int b = 0; b < 6; ++b) {
    if (b == 4) continue;  // RefQ8K's NaN value is not a number to compare
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(static_cast<double>(ref[b].d) * ref[b].q[i], want[static_cast<size_t>(256 * b + i)])
          << "block " << b << " value " << i;
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += ref[b].q[16 * g + i];
      ASSERT_EQ(ref[b].bsums[g], sum);
    }
  }
  EXPECT_EQ(ref[1].d, 0.0f);
  EXPECT_EQ(ref[2].q[3], -127);
  EXPECT_EQ(ref[2].q[200], 127);
  EXPECT_EQ(ref[3].q[10], -127);
  EXPECT_EQ(ref[3].q[11], 127);
  for (Isa isa : AvailableIsas()) {
    ASSERT_TRUE(SetActiveIsa(isa));
    std::fill(got.begin(), got.end(), internal::Q8KBlock{});
    internal::Ops().quantize_q8k(x.data(), 256 * 6, got.data());
    for (int b = 0; b < 6; ++b) {
      EXPECT_EQ(0, std::memcmp(ref[b].q, got[b].q, 256)) << IsaName(isa) << " block " << b;
      EXPECT_EQ(0, std::memcmp(ref[b].bsums, got[b].bsums, 32)) << IsaName(isa) << " block " << b;
      EXPECT_EQ(0, std::memcmp(&ref[b].d, &got[b].d, 4)) << IsaName(isa) << " block " << b;
    }
  }
  SetActiveIsa(AvailableIsas().back());
}

// Q8_0 activation rounding of the 32-value types: every path writes
// QuantizeQ8_32Ref's bytes, and those are llama.cpp's x86 ones (RefQ8_32).
TEST(Q8_32Test, PathsWriteTheReferenceBytes) {
  std::vector<float> x = RandomVec(32 * 8, 90, 2.0f);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;        // block 1: all zero
  x[64 + 3] = std::numeric_limits<float>::quiet_NaN();  // block 2: a NaN never wins
  x[96 + 1] = 65504.0f * 127.0f;                        // block 3: d at the fp16 limit
  for (int i = 0; i < 32; ++i) x[128 + i] = 0.5f * static_cast<float>(i - 16);  // a ramp
  std::vector<internal::Q8Block32> ref(8), got(8);
  internal::QuantizeQ8_32Ref(x.data(), 32 * 8, ref.data());
  const std::vector<double> want = RefQ8_32(x.data(), 32 * 8);
  for (int b = 0; b < 8; ++b) {
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      sum += ref[b].q[i];
      if (b == 2) continue;  // RefQ8_32's NaN value is not a number to compare
      ASSERT_EQ(static_cast<double>(ref[b].d) * ref[b].q[i], want[static_cast<size_t>(32 * b + i)])
          << "block " << b << " value " << i;
    }
    ASSERT_EQ(ref[b].sum, sum) << "block " << b;
  }
  EXPECT_EQ(ref[1].d, 0.0f);
  EXPECT_EQ(ref[1].sum, 0);
  for (Isa isa : AvailableIsas()) {
    ASSERT_TRUE(SetActiveIsa(isa));
    std::fill(got.begin(), got.end(), internal::Q8Block32{});
    internal::Ops().quantize_q8_32(x.data(), 32 * 8, got.data());
    for (int b = 0; b < 8; ++b) {
      EXPECT_EQ(0, std::memcmp(ref[b].q, got[b].q, 32)) << IsaName(isa) << " block " << b;
      EXPECT_EQ(0, std::memcmp(&ref[b].d, &got[b].d, 4)) << IsaName(isa) << " block " << b;
      EXPECT_EQ(ref[b].sum, got[b].sum) << IsaName(isa) << " block " << b;
    }
  }
  SetActiveIsa(AvailableIsas().back());
}

TEST(MatMulPathsTest, RandomBlockBytesGiveTheSameBitsOnEveryPath) {
  // Any bytes a file may hold (Q8_0's -128, Q6_K scales of -128, every
  // fifth-bit pattern) stay within the integer kernels' exact ranges: every
  // path, decode- and prompt-sized, returns the scalar reference's bits.
  ThreadPool pool(2);
  for (DType type : AllWeightTypes()) {
    if (GetDTypeInfo(type).block_values == 1) continue;
    SCOPED_TRACE(DTypeName(type));
    const int64_t n_cols = 512, n_rows = 19;
    std::vector<uint8_t> bytes;
    for (int64_t r = 0; r < n_rows; ++r) {
      const std::vector<uint8_t> row = RandomBlockBytes(type, n_cols, static_cast<uint32_t>(100 + r));
      bytes.insert(bytes.end(), row.begin(), row.end());
    }
    const Matrix m{type, bytes.data(), n_cols, n_rows, RowBytes(type, n_cols)};
    for (int64_t n_tokens : {1, 3, 29}) {
      const std::vector<float> x = RandomVec(n_tokens * n_cols, 33, 4.0f);
      ASSERT_TRUE(SetActiveIsa(Isa::kScalar));
      const std::vector<float> ref = MatMulChunked(m, x, n_tokens, n_tokens, &pool);
      for (Isa isa : AvailableIsas()) {
        ASSERT_TRUE(SetActiveIsa(isa));
        const std::vector<float> got = MatMulChunked(m, x, n_tokens, n_tokens, &pool);
        EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * 4))
            << IsaName(isa) << ", " << n_tokens << " tokens";
      }
    }
  }
  SetActiveIsa(AvailableIsas().back());
}

TEST(MatMulPathsTest, SimdPathsAgreeWithScalar) {
  ThreadPool pool(2);
  for (DType type : AllWeightTypes()) {
    SCOPED_TRACE(DTypeName(type));
    // 29 tokens: K-quants run the prompt panels (plus a 5-token tail) as well.
    const int64_t n_cols = IsKQuant(type) ? 768 : 224, n_rows = 45, n_tokens = 29;
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 31);
    const std::vector<float> x = RandomVec(n_tokens * n_cols, 32);
    ASSERT_TRUE(SetActiveIsa(Isa::kScalar));
    const std::vector<float> ref = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
    for (Isa isa : AvailableIsas()) {
      ASSERT_TRUE(SetActiveIsa(isa));
      const std::vector<float> got = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
      if (GetDTypeInfo(type).block_values > 1) {
        // The integer path has one f32 order on every path (qdot_blocks.h).
        EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * 4)) << IsaName(isa);
        continue;
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          double abs_sum = 0;
          for (int64_t k = 0; k < n_cols; ++k) {
            abs_sum += std::fabs(tm.deq[static_cast<size_t>(r * n_cols + k)] *
                                 x[static_cast<size_t>(t * n_cols + k)]);
          }
          const size_t i = static_cast<size_t>(t * n_rows + r);
          ASSERT_NEAR(got[i], ref[i], 2 * DotTolerance(n_cols, abs_sum)) << IsaName(isa);
        }
      }
    }
  }
  SetActiveIsa(AvailableIsas().back());
}

}  // namespace
}  // namespace mx::kernels
