// Tests of the integer path for quantized weights (kernels/qdot_blocks.h):
// llama.cpp's activation rounding byte for byte on every path, shared inputs
// quantized once per call, and any bytes a file may hold giving the scalar
// reference's bits on every path. The per-type accuracy and batch-invariance
// tests of MatMul, which cover these types too, are in kernels_test.cc.
#include <gtest/gtest.h>
#include <sys/mman.h>

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
