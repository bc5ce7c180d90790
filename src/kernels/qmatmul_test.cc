// Tests of the integer path for quantized weights (kernels/qdot_blocks.h):
// llama.cpp's activation rounding byte for byte on every path, shared inputs
// quantized once per call, and any bytes a file may hold giving the scalar
// reference's bits on every path. The per-type accuracy and batch-invariance
// tests of MatMul, which cover these types too, are in kernels_test.cc.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/kernels_test_util.h"

namespace mx::kernels {
namespace {

class QMatMulTest : public PathTest {};
MX_PATH_SUITE(QMatMulTest);

TEST_P(QMatMulTest, SharedInputsAreQuantizedOnceForAllJobs) {
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
  x[512 + 3] = 9.0f;                                // block 2: +9 first, -9 later: +9 wins
  x[512 + 200] = -9.0f;
  x[768 + 10] = -9.0f;  // block 3: -9 first, +9 later: -9 wins
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
      const std::vector<uint8_t> row =
          RandomBlockBytes(type, n_cols, static_cast<uint32_t>(100 + r));
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

// Each path's integer gemm called directly (no MatMul split) for one shape
// against the scalar reference's outputs of a larger product: an output
// element depends only on its row and token, never on how many rows and
// tokens share the call. Activations and outputs have strides wider than
// the data, and the outputs' padding must stay untouched.
void ExpectTilesMatchReference(DType type, int64_t n_cols, const std::vector<int64_t>& row_counts,
                               const std::vector<int64_t>& token_counts) {
  const bool k_quant = IsKQuant(type);
  const int64_t n_blocks = n_cols / (k_quant ? internal::kQ8KValues : internal::kQ8Block32Values);
  const int64_t max_rows = *std::max_element(row_counts.begin(), row_counts.end());
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  const size_t row_bytes = RowBytes(type, n_cols);
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(max_rows));
  const std::vector<float> src = RandomVec(max_rows * n_cols, 110, 0.5f);
  for (int64_t r = 0; r < max_rows; ++r)
    QuantizeRow(type, &src[static_cast<size_t>(r * n_cols)], w.data() + r * row_bytes, n_cols);
  const std::vector<float> x = RandomVec(max_tokens * n_cols, 111, 2.0f);
  const int64_t lda = n_blocks + 1;
  std::vector<internal::Q8KBlock> qk(k_quant ? static_cast<size_t>(max_tokens * lda) : 0);
  std::vector<internal::Q8Block32> q32(k_quant ? 0 : static_cast<size_t>(max_tokens * lda));
  for (int64_t t = 0; t < max_tokens; ++t) {
    const float* xt = &x[static_cast<size_t>(t * n_cols)];
    if (k_quant) {
      internal::QuantizeQ8KRef(xt, n_cols, &qk[static_cast<size_t>(t * lda)]);
    } else {
      internal::QuantizeQ8_32Ref(xt, n_cols, &q32[static_cast<size_t>(t * lda)]);
    }
  }
  auto run = [&](const internal::IsaOps& ops, int64_t n_rows, int64_t n_tokens, float* y,
                 int64_t ldy) {
    if (k_quant) {
      ops.qgemm(type, w.data(), row_bytes, n_rows, n_blocks, qk.data(), lda, n_tokens, y, ldy);
    } else {
      ops.qgemm32(type, w.data(), row_bytes, n_rows, n_blocks, q32.data(), lda, n_tokens, y, ldy);
    }
  };
  std::vector<float> ref(static_cast<size_t>(max_tokens * max_rows));
  run(internal::ScalarOps(), max_rows, max_tokens, ref.data(), max_rows);
  const float kPad = -1234.5f;
  for (Isa isa : AvailableIsas()) {
    if (isa == Isa::kScalar) continue;
    ASSERT_TRUE(SetActiveIsa(isa));
    for (int64_t n_rows : row_counts) {
      for (int64_t n_tokens : token_counts) {
        const int64_t ldy = n_rows + 3;
        std::vector<float> y(static_cast<size_t>(n_tokens * ldy), kPad);
        run(internal::Ops(), n_rows, n_tokens, y.data(), ldy);
        for (int64_t t = 0; t < n_tokens; ++t) {
          const float* got = &y[static_cast<size_t>(t * ldy)];
          ASSERT_EQ(0, std::memcmp(got, &ref[static_cast<size_t>(t * max_rows)], n_rows * 4))
              << IsaName(isa) << ", " << n_rows << " rows, " << n_tokens << " tokens, token " << t;
          for (int64_t r = n_rows; r < ldy; ++r)
            ASSERT_EQ(got[r], kPad) << IsaName(isa) << ", padding after row " << n_rows;
        }
      }
    }
  }
  SetActiveIsa(AvailableIsas().back());
}

TEST(QGemmTilesTest, EveryTileShapeGivesTheScalarBits) {
  // Rows around the 16-row panels and 32-row pairs (and the 8-row decode
  // tiles); tokens around the decode / panel threshold (12) and the panel
  // tiles of 4, 6 and 8 tokens.
  const std::vector<int64_t> rows = {1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 70};
  const std::vector<int64_t> tokens = {1, 5, 11, 12, 13, 16, 17, 23, 25, 30, 31};
  for (DType type : AllWeightTypes()) {
    if (GetDTypeInfo(type).block_values == 1) continue;
    SCOPED_TRACE(DTypeName(type));
    ExpectTilesMatchReference(type, 512, rows, tokens);
  }
}

TEST(QGemmTilesTest, LongRowsAndManyTokensGiveTheScalarBits) {
  // 3072 columns: the reduction runs in several block passes (partial
  // results waiting in y) and the tokens in several chunks, the last short.
  for (DType type : AllWeightTypes()) {
    if (GetDTypeInfo(type).block_values == 1) continue;
    SCOPED_TRACE(DTypeName(type));
    ExpectTilesMatchReference(type, 3072, {40}, {100, 157});
  }
}

TEST(QMatMulStrideTest, RowsFartherApartThanGatherOffsetsReachGiveTheSameBits) {
  // Row stride 300 MB (only a hostile file has such rows): the kernels'
  // 32-bit header gathers cannot address row 8 from row 0, so MatMul must
  // feed them one row at a time. Only the rows' first blocks are touched, so
  // the reservation costs no memory.
  const size_t stride = size_t{300} << 20;
  const int64_t n_rows = 9, n_cols = 256;
  void* map = mmap(nullptr, stride * n_rows, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  ThreadPool pool(2);
  for (DType type : {DType::kQ4_K, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(type));
    const TestMatrix tm = MakeMatrix(type, n_rows, n_cols, 91);
    auto* far = static_cast<uint8_t*>(map);
    for (int64_t r = 0; r < n_rows; ++r)
      std::memcpy(far + r * stride, tm.bytes.data() + r * tm.m.row_bytes, tm.m.row_bytes);
    Matrix spread = tm.m;
    spread.data = far;
    spread.row_bytes = stride;
    for (int64_t n_tokens : {1, 20}) {
      const std::vector<float> x = RandomVec(n_tokens * n_cols, 92);
      const std::vector<float> want = MatMulChunked(tm.m, x, n_tokens, n_tokens, &pool);
      const std::vector<float> got = MatMulChunked(spread, x, n_tokens, n_tokens, &pool);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << n_tokens << " tokens";
    }
  }
  munmap(map, stride * n_rows);
}

}  // namespace
}  // namespace mx::kernels
