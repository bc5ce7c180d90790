// The two phases of long-context generation attention (kernels.h
// AttentionScores / AttentionFromScores) against AttentionRows: the same
// bytes for every KV type pair, head shape, chunking of the positions and
// order of the chunks, on every path that has them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

class AttentionSplitTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SetActiveIsa(GetParam())); }
  void TearDown() override { SetActiveIsa(AvailableIsas().back()); }
};
INSTANTIATE_TEST_SUITE_P(Paths, AttentionSplitTest, ::testing::ValuesIn(AvailableIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return IsaName(info.param);
                         });

struct Case {
  int n_head, n_kv, hd;
  std::vector<int64_t> n_pos;  // per query
};

TEST_P(AttentionSplitTest, PhasesGiveAttentionRowsBytes) {
  const Case cases[] = {{16, 8, 128, {1500}}, {9, 3, 64, {1041}},       {4, 2, 40, {100, 77}},
                        {8, 2, 128, {300}},   {2, 2, 80, {1}},          {6, 2, 64, {0}},
                        {4, 4, 96, {33, 35}}, {3, 1, 48, {64}},         {1, 1, 200, {250}},
                        {20, 20, 64, {700}},  {40, 20, 128, {130, 129}}};
  const std::pair<DType, DType> plain[] = {{DType::kF16, DType::kF16}, {DType::kF32, DType::kF32}};
  const std::pair<DType, DType> quant[] = {{DType::kQ8_0, DType::kQ8_0},
                                           {DType::kQ4_0, DType::kQ4_0},
                                           {DType::kF16, DType::kQ4_0},
                                           {DType::kQ8_0, DType::kF32}};
  int checked = 0;
  for (const Case& c : cases) {
    std::vector<std::pair<DType, DType>> pairs(std::begin(plain), std::end(plain));
    if (c.hd % kKvBlockValues == 0) pairs.insert(pairs.end(), std::begin(quant), std::end(quant));
    for (const auto& [kt, vt] : pairs) {
      const auto n_q = static_cast<int64_t>(c.n_pos.size());
      const int64_t max_pos =
          std::max<int64_t>(1, *std::max_element(c.n_pos.begin(), c.n_pos.end()));
      SCOPED_TRACE(DTypeName(kt) + "/" + DTypeName(vt) + " heads " + std::to_string(c.n_head) +
                   "/" + std::to_string(c.n_kv) + " dim " + std::to_string(c.hd) + " pos " +
                   std::to_string(max_pos) + " queries " + std::to_string(n_q));
      const int64_t kv_dim = int64_t{c.n_kv} * c.hd, q_dim = int64_t{c.n_head} * c.hd;
      // Rows padded past their heads, as a layout may pad them.
      const size_t k_rb = KvHeadBytes(kt, c.hd) * c.n_kv + 64,
                   v_rb = KvHeadBytes(vt, c.hd) * c.n_kv + 16;
      std::vector<uint8_t> k(k_rb * max_pos), v(v_rb * max_pos);
      for (int64_t p = 0; p < max_pos; ++p) {
        StoreKvRow(kt, Random(kv_dim, static_cast<uint32_t>(2 * p)).data(), kv_dim, &k[p * k_rb]);
        StoreKvRow(vt, Random(kv_dim, static_cast<uint32_t>(2 * p + 1)).data(), kv_dim,
                   &v[p * v_rb]);
      }
      const KvView kv{kt, vt, k.data(), v.data(), k_rb, v_rb, c.n_kv, c.hd};
      if (!AttentionSplitAvailable(n_q, c.n_head, kv)) {
        // Only the AVX-512 paths have the phases.
        EXPECT_LT(GetParam(), Isa::kAvx512);
        continue;
      }
      const std::vector<float> q = Random(n_q * q_dim, 99);
      std::vector<float> want(static_cast<size_t>(n_q * q_dim), -1.0f);
      std::vector<float> scratch(static_cast<size_t>(AttentionScratchFloats(max_pos, c.hd)));
      AttentionRows(q.data(), q_dim, n_q, c.n_head, kv, c.n_pos.data(), 0.3f, want.data(), q_dim,
                    scratch.data());
      const int64_t lds = (max_pos + 15) / 16 * 16;
      for (int64_t chunk : {int64_t{16}, int64_t{48}, int64_t{512}, lds}) {
        std::vector<float> s(static_cast<size_t>(n_q * c.n_head * lds), 7.0f);
        // Chunks last to first: each must stand alone.
        for (int64_t p0 = (lds - 1) / chunk * chunk; p0 >= 0; p0 -= chunk) {
          AttentionScores(q.data(), q_dim, n_q, c.n_head, kv, c.n_pos.data(), p0, p0 + chunk, 0.3f,
                          s.data(), lds);
        }
        // Phase two one kv head per call, all of them in one, and in two runs
        // of adjacent heads (as the runner's tasks): each from fresh scores.
        const int splits[][3] = {{0, 0, 0}, {0, c.n_kv, c.n_kv}, {0, c.n_kv / 2, c.n_kv}};
        for (int way = 0; way < 3; ++way) {
          std::vector<float> sw = s;
          std::vector<float> got(want.size(), -2.0f);
          if (way == 0) {
            for (int h = 0; h < c.n_kv; ++h) {
              AttentionFromScores(n_q, c.n_head, kv, c.n_pos.data(), h, h + 1, sw.data(), lds,
                                  got.data(), q_dim);
            }
          } else {
            for (int r = 0; r < 2; ++r) {
              AttentionFromScores(n_q, c.n_head, kv, c.n_pos.data(), splits[way][r],
                                  splits[way][r + 1], sw.data(), lds, got.data(), q_dim);
            }
          }
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4))
              << "chunk " << chunk << " way " << way;
          ++checked;
        }
      }
    }
  }
  if (GetParam() >= Isa::kAvx512) {
    EXPECT_GT(checked, 100);
  }
}

TEST_P(AttentionSplitTest, OnlyFewRowTilesQualify) {
  std::vector<uint8_t> rows(1024);
  const KvView kv{DType::kF16, DType::kF16, rows.data(), rows.data(), 256, 256, 2, 64};
  // 4 heads over 2 kv heads: 2 rows per kv head per query; 3 queries make 6.
  EXPECT_FALSE(AttentionSplitAvailable(3, 4, kv));
  EXPECT_EQ(AttentionSplitAvailable(2, 4, kv), GetParam() >= Isa::kAvx512);
}

}  // namespace
}  // namespace mx::kernels
