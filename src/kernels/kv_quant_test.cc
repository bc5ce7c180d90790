// Quantized KV rows (Q8_0, Q4_0): StoreKvRow writes llama.cpp's bytes,
// LoadKvRow reads them back exactly, and attention over quantized K and V
// (alone or mixed with F16 / F32) agrees with the scalar reference on every
// path and is bit-identical whatever the batch and tile (batch invariance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

std::vector<float> RandomVec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// llama.cpp's x86 quantize_row_q8_0, written out again for the test.
std::vector<uint8_t> LlamaQ8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* v = &x[32 * b];
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
    const uint16_t d = F32ToFp16(amax / 127.0f);
    out.push_back(static_cast<uint8_t>(d & 0xFF));
    out.push_back(static_cast<uint8_t>(d >> 8));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) {
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::nearbyintf(v[j] * id))));
    }
  }
  return out;
}

// ggml's quantize_row_q4_0_ref, written out again for the test.
std::vector<uint8_t> LlamaQ4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* v = &x[32 * b];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = F32ToFp16(d);
    out.push_back(static_cast<uint8_t>(h & 0xFF));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (int j = 0; j < 16; ++j) {
      const float x0 = v[j] * id, x1 = v[j + 16] * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      out.push_back(static_cast<uint8_t>(q0 | (q1 << 4)));
    }
  }
  return out;
}

std::vector<uint8_t> Store(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> row(RowBytes(type, static_cast<int64_t>(x.size())));
  StoreKvRow(type, x.data(), static_cast<int64_t>(x.size()), row.data());
  return row;
}

class KvQuantTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(SetActiveIsa(GetParam())); }
  void TearDown() override { SetActiveIsa(AvailableIsas().back()); }
};
INSTANTIATE_TEST_SUITE_P(Paths, KvQuantTest, ::testing::ValuesIn(AvailableIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return IsaName(info.param);
                         });

TEST_P(KvQuantTest, RowBytesFollowTheBlockLayout) {
  EXPECT_EQ(KvHeadBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(KvHeadBytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(KvHeadBytes(DType::kF16, 64), 128u);
  EXPECT_EQ(KvHeadBytes(DType::kF32, 40), 160u);
  EXPECT_EQ(KvHeadBytes(DType::kQ8_0, 40), 0u);  // not whole blocks
  EXPECT_EQ(KvHeadBytes(DType::kQ4_1, 64), 0u);  // not a KV type
  EXPECT_TRUE(KvTypeSupported(DType::kQ4_0));
  EXPECT_FALSE(KvTypeSupported(DType::kBF16));
}

TEST_P(KvQuantTest, Q8_0RowsAreLlamaCppsBytes) {
  std::vector<float> x = RandomVec(32 * 64, 1, 3.0f);
  // Ties: with a = 127 the multiplier is 1, so 2.5 and -3.5 sit exactly
  // between two levels; x86 rounds them to even (2, -4), roundf would not.
  std::vector<float> ties(32, 0.0f);
  ties[0] = 127.0f;
  ties[1] = 2.5f;
  ties[2] = -3.5f;
  ties[3] = 0.5f;
  x.insert(x.end(), ties.begin(), ties.end());
  x.insert(x.end(), 32, 0.0f);          // an all-zero block: d = 0, q = 0
  std::vector<float> tiny(32, 1e-30f);  // d underflows to zero in fp16
  x.insert(x.end(), tiny.begin(), tiny.end());
  const std::vector<uint8_t> got = Store(DType::kQ8_0, x);
  ASSERT_EQ(got, LlamaQ8_0(x));
  const size_t tie_block = 64 * 34;
  EXPECT_EQ(static_cast<int8_t>(got[tie_block + 2 + 1]), 2);
  EXPECT_EQ(static_cast<int8_t>(got[tie_block + 2 + 2]), -4);
  EXPECT_EQ(static_cast<int8_t>(got[tie_block + 2 + 3]), 0);
}

TEST_P(KvQuantTest, Q4_0RowsAreLlamaCppsBytes) {
  std::vector<float> x = RandomVec(32 * 64, 2, 3.0f);
  std::vector<float> edge(32, 0.0f);
  edge[5] = -8.0f;  // the first of the largest magnitude sets d (negative max: d = 1)
  edge[6] = 8.0f;
  edge[7] = 0.5f;  // 0.5 + 8.5 = 9: level 9
  edge[8] = -0.49f;
  x.insert(x.end(), edge.begin(), edge.end());
  x.insert(x.end(), 32, 0.0f);
  const std::vector<uint8_t> got = Store(DType::kQ4_0, x);
  ASSERT_EQ(got, LlamaQ4_0(x));
  const size_t b = 64 * 18;
  EXPECT_EQ(Fp16ToF32(static_cast<uint16_t>(got[b] | (got[b + 1] << 8))), 1.0f);
  EXPECT_EQ(got[b + 2 + 5] & 0xF, 0);   // -8 / 1 + 8.5 = 0.5: level 0
  EXPECT_EQ(got[b + 2 + 6] & 0xF, 15);  // 16.5 clamps to 15
  EXPECT_EQ(got[b + 2 + 7] & 0xF, 9);
  EXPECT_EQ(got[b + 2 + 8] & 0xF, 8);
}

TEST_P(KvQuantTest, LoadKvRowIsTheExactDequantization) {
  const std::vector<float> x = RandomVec(32 * 16, 3, 2.0f);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    const std::vector<uint8_t> row = Store(t, x);
    std::vector<float> back(x.size());
    LoadKvRow(t, row.data(), static_cast<int64_t>(x.size()), back.data());
    const size_t bb = GetDTypeInfo(t).block_bytes;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t* block = &row[i / 32 * bb];
      const float d = Fp16ToF32(static_cast<uint16_t>(block[0] | (block[1] << 8)));
      const int j = static_cast<int>(i % 32);
      const float q =
          t == DType::kQ8_0
              ? static_cast<float>(static_cast<int8_t>(block[2 + j]))
              : static_cast<float>((j < 16 ? block[2 + j] & 0xF : block[2 + j - 16] >> 4) - 8);
      ASSERT_EQ(back[i], q * d) << i;
      // The rounding error: half a level (Q8_0, plus the fp16 rounding of
      // d), or one level for Q4_0 (its 16 levels are -8..7: the largest
      // value of the other sign clamps to 7).
      float amax = 0.0f;
      for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j)
        amax = std::max(amax, std::fabs(x[j]));
      const float bound =
          t == DType::kQ8_0 ? amax * (0.5f / 127 + 1e-3f) : amax * (1.0f / 8 + 1e-3f);
      ASSERT_LE(std::fabs(back[i] - x[i]), bound) << i;
    }
  }
}

// K/V rows of n_pos positions of `n_kv` heads of `hd` dims, types kt / vt.
struct Rows {
  std::vector<uint8_t> k, v;
  KvView view;
};
Rows MakeRows(DType kt, DType vt, int n_kv, int hd, int64_t n_pos, uint32_t seed) {
  Rows r;
  const int64_t kv_dim = int64_t{n_kv} * hd;
  const size_t k_rb = KvHeadBytes(kt, hd) * n_kv, v_rb = KvHeadBytes(vt, hd) * n_kv;
  r.k.resize(k_rb * static_cast<size_t>(n_pos));
  r.v.resize(v_rb * static_cast<size_t>(n_pos));
  for (int64_t p = 0; p < n_pos; ++p) {
    StoreKvRow(kt, RandomVec(kv_dim, seed + static_cast<uint32_t>(p)).data(), kv_dim,
               &r.k[static_cast<size_t>(p) * k_rb]);
    StoreKvRow(vt, RandomVec(kv_dim, seed + 7777 + static_cast<uint32_t>(p)).data(), kv_dim,
               &r.v[static_cast<size_t>(p) * v_rb]);
  }
  r.view = KvView{kt, vt, r.k.data(), r.v.data(), k_rb, v_rb, n_kv, hd};
  return r;
}

const std::pair<DType, DType> kQuantPairs[] = {{DType::kQ8_0, DType::kQ8_0},
                                               {DType::kQ4_0, DType::kQ4_0},
                                               {DType::kQ8_0, DType::kQ4_0},
                                               {DType::kQ4_0, DType::kF16},
                                               {DType::kF32, DType::kQ8_0}};

std::string Name(DType k, DType v) { return "K " + DTypeName(k) + " V " + DTypeName(v); }

// Every path against the scalar reference on the same quantized rows.
TEST_P(KvQuantTest, AttentionAgreesWithTheScalarPath) {
  for (const auto& [kt, vt] : kQuantPairs) {
    for (int hd : {32, 64, 128}) {
      SCOPED_TRACE(Name(kt, vt) + " head_dim " + std::to_string(hd));
      const int n_head = 8, n_kv = 2;
      const int64_t max_pos = 140, n_q = 9, dim = int64_t{n_head} * hd;
      const Rows rows = MakeRows(kt, vt, n_kv, hd, max_pos, 11);
      const std::vector<float> q = RandomVec(n_q * dim, 12, 0.7f);
      const std::vector<int64_t> n_pos = {140, 1, 17, 64, 65, 0, 100, 139, 3};
      std::vector<float> scratch(static_cast<size_t>(AttentionScratchFloats(max_pos, hd)));
      std::vector<float> got(static_cast<size_t>(n_q * dim)), want(got.size());
      AttentionRows(q.data(), dim, n_q, n_head, rows.view, n_pos.data(), 0.15f, got.data(), dim,
                    scratch.data());
      ASSERT_TRUE(SetActiveIsa(Isa::kScalar));
      AttentionRows(q.data(), dim, n_q, n_head, rows.view, n_pos.data(), 0.15f, want.data(), dim,
                    scratch.data());
      ASSERT_TRUE(SetActiveIsa(GetParam()));
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-6) << i;
    }
  }
}

// Batch invariance: however the queries of a sequence are grouped into calls
// (1 query at a time, tiles of any size, one call per head through a
// one-kv-head view), each query's output has the same bits. The GQA groups
// make row sets of every size the kernels distinguish (few rows, 16, 32).
TEST_P(KvQuantTest, AttentionIsBitIdenticalWhateverTheTile) {
  for (const auto& [kt, vt] : kQuantPairs) {
    for (int group : {1, 4, 8}) {
      SCOPED_TRACE(Name(kt, vt) + " group " + std::to_string(group));
      const int hd = 64, n_kv = 2, n_head = n_kv * group;
      const int64_t n_q = 37, dim = int64_t{n_head} * hd, max_pos = 130;
      const Rows rows = MakeRows(kt, vt, n_kv, hd, max_pos, 21);
      const std::vector<float> q = RandomVec(n_q * dim, 22);
      std::vector<int64_t> n_pos(static_cast<size_t>(n_q));
      for (int64_t i = 0; i < n_q; ++i) n_pos[static_cast<size_t>(i)] = 94 + i;  // causal
      n_pos[5] = 1;
      std::vector<float> scratch(static_cast<size_t>(AttentionScratchFloats(max_pos, hd)));
      std::vector<float> alone(static_cast<size_t>(n_q * dim));
      for (int64_t i = 0; i < n_q; ++i) {
        AttentionRow(&q[static_cast<size_t>(i * dim)], n_head, rows.view,
                     n_pos[static_cast<size_t>(i)], 0.125f, &alone[static_cast<size_t>(i * dim)],
                     scratch.data());
      }
      for (int64_t tile : {2, 3, 4, 5, 16, 37}) {
        std::vector<float> tiled(alone.size(), -1.0f);
        for (int64_t i0 = 0; i0 < n_q; i0 += tile) {
          const int64_t nq = std::min(tile, n_q - i0);
          AttentionRows(&q[static_cast<size_t>(i0 * dim)], dim, nq, n_head, rows.view,
                        &n_pos[static_cast<size_t>(i0)], 0.125f,
                        &tiled[static_cast<size_t>(i0 * dim)], dim, scratch.data());
        }
        ASSERT_EQ(0, std::memcmp(tiled.data(), alone.data(), alone.size() * 4)) << "tile " << tile;
      }
      std::vector<float> per_head(alone.size(), -1.0f);
      for (int h = 0; h < n_head; ++h) {
        KvView one = rows.view;
        one.k += static_cast<size_t>(h / group) * KvHeadBytes(kt, hd);
        one.v += static_cast<size_t>(h / group) * KvHeadBytes(vt, hd);
        one.n_kv_head = 1;
        AttentionRows(&q[static_cast<size_t>(h * hd)], dim, n_q, 1, one, n_pos.data(), 0.125f,
                      &per_head[static_cast<size_t>(h * hd)], dim, scratch.data());
      }
      ASSERT_EQ(0, std::memcmp(per_head.data(), alone.data(), alone.size() * 4));
    }
  }
}

// The kernels read exactly the rows they are given: a view whose last row
// ends the buffer (no padding) reads nothing past it (ASan builds check).
TEST_P(KvQuantTest, AttentionReadsNothingPastTheLastRow) {
  for (const auto& [kt, vt] : kQuantPairs) {
    SCOPED_TRACE(Name(kt, vt));
    const int hd = 32, n_head = 1;
    const int64_t n_pos = 3;
    const Rows rows = MakeRows(kt, vt, 1, hd, n_pos, 31);
    std::vector<uint8_t> k(rows.k), v(rows.v);  // exact-size heap blocks
    KvView view = rows.view;
    view.k = k.data();
    view.v = v.data();
    const std::vector<float> q = RandomVec(hd * 6, 32);
    std::vector<float> out(q.size());
    std::vector<float> scratch(static_cast<size_t>(AttentionScratchFloats(n_pos, hd)));
    const std::vector<int64_t> np(6, n_pos);
    AttentionRows(q.data(), hd, 6, n_head, view, np.data(), 0.2f, out.data(), hd, scratch.data());
    for (float f : out) ASSERT_TRUE(std::isfinite(f));
  }
}

}  // namespace
}  // namespace mx::kernels
