// Kernel tests. Every test that takes a path runs once per instruction-set
// path this CPU has (scalar, avx2, avx512), forced with SetActiveIsa, against
// straightforward double-precision references written from ENGINE-FACTS
// (independently of quant.cc). Batch-invariance tests compare bytes.
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/kernels_test_util.h"

namespace mx::kernels {
namespace {

// ---------------------------------------------------------------- dispatch

TEST(DispatchTest, NamesRoundTripAndScalarIsAlwaysThere) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
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
  // roundings. BF16 weights on amx read bf16-rounded activations.
  const int64_t block = GetDTypeInfo(type).block_values;
  const bool integer = block > 1;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    std::vector<double> xt(&x[static_cast<size_t>(t * ldx)],
                           &x[static_cast<size_t>(t * ldx + s.n_cols)]);
    if (RoundsBf16Activations(type)) xt = RoundedToBf16(xt);
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
  // Shape: cols, rows, tokens; rows shorter than one vector or tile row too.
  const Shape shapes[] = {{32, 1, 1},    {37, 5, 3},     {100, 17, 7}, {129, 9, 37},
                          {576, 257, 6}, {1000, 33, 13}, {4096, 3, 2}, {64, 64, 5},
                          {1, 17, 20},   {5, 40, 3},     {18, 33, 17}};
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
  // Above the per-task token blocks (96 tokens for f32 activations, 512 for
  // the integer path), with many row blocks and threads. Every weight type:
  // decode sizes run register tiles on the stored weights, long prompts f32
  // panels or the integer prompt panels; all must give the same bits.
  ThreadPool pool(3);
  for (DType type : AllWeightTypes()) {
    SCOPED_TRACE(DTypeName(type));
    const int64_t n_tokens = 600, n_rows = 150, n_cols = 512;
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 21);
    const std::vector<float> x = RandomVec(n_tokens * n_cols, 22);
    const std::vector<float> all = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
    const std::vector<float> one = MatMulChunked(tm.m, x, n_tokens, 1, nullptr);
    const std::vector<float> c7 = MatMulChunked(tm.m, x, n_tokens, 7, &pool);
    EXPECT_EQ(0, std::memcmp(all.data(), one.data(), all.size() * 4));
    EXPECT_EQ(0, std::memcmp(all.data(), c7.data(), all.size() * 4));
  }
}

TEST_P(MatMulTest, WeightAddressDoesNotChangeTheBits) {
  // The same rows at a 64-byte boundary and off it (GGUF aligns tensors to
  // 32 bytes; 4 bytes off is the least an f32 row needs): paths that read
  // aligned rows in place and copy the others give the same values.
  ThreadPool pool(2);
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(type));
    const int64_t n_cols = 512, n_rows = 70;
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 23);
    const size_t bytes = tm.m.row_bytes * static_cast<size_t>(n_rows);
    std::vector<uint8_t> raw(bytes + 128);
    const size_t base = (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
    for (int64_t tokens : {1, 40}) {
      const std::vector<float> x = RandomVec(tokens * n_cols, 24);
      std::vector<std::vector<float>> ys;
      for (size_t offset : {size_t{0}, size_t{32}, size_t{4}}) {
        uint8_t* at = raw.data() + base + offset;
        std::memcpy(at, tm.m.data, bytes);
        Matrix m = tm.m;
        m.data = at;
        ys.push_back(MatMulChunked(m, x, tokens, tokens, &pool));
      }
      EXPECT_EQ(0, std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * 4)) << tokens;
      EXPECT_EQ(0, std::memcmp(ys[0].data(), ys[2].data(), ys[0].size() * 4)) << tokens;
    }
  }
}

TEST_P(MatMulTest, GroupedProductsEqualSeparateOnes) {
  // MatMuls over more jobs than one region takes (kMaxMatMulJobs), of mixed
  // types and token counts, gives each job exactly MatMul's bits (however
  // the region splits its rows into tasks).
  ThreadPool pool(2);
  const DType types[] = {DType::kQ8_0, DType::kQ4_K, DType::kF16, DType::kQ5_0, DType::kQ6_K};
  const int64_t n_cols = 512;
  const int n_jobs = static_cast<int>(kMaxMatMulJobs) + 3;
  std::vector<TestMatrix> ms;
  std::vector<std::vector<float>> xs, grouped, single;
  std::vector<MatMulJob> jobs;
  auto tokens_of = [](int i) -> int64_t { return i % 2 == 0 ? 1 : 9; };
  for (int i = 0; i < n_jobs; ++i) {
    const int64_t n_rows = 40 + 8 * (i % 5);
    ms.push_back(MakeMatrix(types[i % 5], n_rows, n_cols, 40 + i));
    xs.push_back(RandomVec(tokens_of(i) * n_cols, 50 + i));
    grouped.emplace_back(static_cast<size_t>(tokens_of(i) * n_rows));
    single.emplace_back(static_cast<size_t>(tokens_of(i) * n_rows));
  }
  for (int i = 0; i < n_jobs; ++i) {
    jobs.push_back({ms[i].m, xs[i].data(), n_cols, tokens_of(i), grouped[i].data(), ms[i].m.n_rows});
    MatMul(ms[i].m, xs[i].data(), n_cols, tokens_of(i), single[i].data(), ms[i].m.n_rows, nullptr);
  }
  MatMuls(jobs, &pool);
  for (int i = 0; i < n_jobs; ++i) {
    EXPECT_EQ(0, std::memcmp(grouped[i].data(), single[i].data(), grouped[i].size() * 4))
        << "job " << i;
  }
}

TEST(MatMulPathsTest, SimdPathsAgreeWithScalar) {
  ThreadPool pool(2);
  for (DType type : AllWeightTypes()) {
    SCOPED_TRACE(DTypeName(type));
    // 29 tokens: K-quants run the prompt panels (plus a 5-token tail) as well.
    const int64_t n_cols = IsKQuant(type) ? 768 : 224, n_rows = 45, n_tokens = 29;
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 31);
    const std::vector<float> x = RandomVec(n_tokens * n_cols, 32);
    // What a path that rounds BF16 activations reads, in f32.
    std::vector<float> x_bf16(x.size());
    for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = Bf16ToF32(F32ToBf16(x[i]));
    ASSERT_TRUE(SetActiveIsa(Isa::kScalar));
    const std::vector<float> ref = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
    const std::vector<float> ref_bf16 = MatMulChunked(tm.m, x_bf16, n_tokens, n_tokens, &pool);
    for (Isa isa : AvailableIsas()) {
      ASSERT_TRUE(SetActiveIsa(isa));
      const std::vector<float> got = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
      const std::vector<float>& want = RoundsBf16Activations(type) ? ref_bf16 : ref;
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
          ASSERT_NEAR(got[i], want[i], 2 * DotTolerance(n_cols, abs_sum)) << IsaName(isa);
        }
      }
    }
  }
  SetActiveIsa(AvailableIsas().back());
}

}  // namespace
}  // namespace mx::kernels
