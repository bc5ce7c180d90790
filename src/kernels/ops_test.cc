// Tests of the non-matmul kernels on every path: RmsNorm, SwiGlu, Silu,
// ReluSquared, Add, KV row conversion and AttentionRow, against double
// references; plus element-position invariance of the vector kernels. RoPE
// is in rope_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/kernels.h"
#include "kernels/kernels_test_util.h"

namespace mx::kernels {
namespace {

using OpsTest = IsaTest;
INSTANTIATE_TEST_SUITE_P(Paths, OpsTest, ::testing::ValuesIn(AvailableIsas()), IsaParamName);

// ------------------------------------------------------------------ norm

TEST_P(OpsTest, RmsNormMatchesDouble) {
  for (int64_t n : {1, 7, 16, 37, 128, 576, 1000}) {
    const std::vector<float> x = RandomVec(n, static_cast<uint32_t>(n), 3.0f);
    const std::vector<float> w = RandomVec(n, 77);
    std::vector<float> out(static_cast<size_t>(n)), out_nw(static_cast<size_t>(n));
    RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
    RmsNorm(x.data(), nullptr, n, 1e-5f, out_nw.data());
    double ss = 0;
    for (float v : x) ss += double{v} * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      const size_t j = static_cast<size_t>(i);
      const double want = x[j] * scale;
      ASSERT_NEAR(out_nw[j], want, 4e-7 * std::fabs(want) + 1e-30) << "n " << n << " i " << i;
      ASSERT_NEAR(out[j], want * w[j], 6e-7 * std::fabs(want * w[j]) + 1e-30)
          << "n " << n << " i " << i;
    }
    // In place gives the same bytes.
    std::vector<float> inplace = x;
    RmsNorm(inplace.data(), w.data(), n, 1e-5f, inplace.data());
    ASSERT_EQ(0, std::memcmp(inplace.data(), out.data(), out.size() * 4));
  }
}

// ------------------------------------------------------- element-wise ops

double SiluRef(double v) { return v / (1.0 + std::exp(-v)); }

TEST_P(OpsTest, SwiGluAndSiluMatchDouble) {
  std::vector<float> g;
  for (float v = -100.0f; v <= 100.0f; v += 0.0173f) g.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 89.5f, -104.5f, 1e4f, -1e4f})
    g.push_back(v);
  const int64_t n = static_cast<int64_t>(g.size());
  const std::vector<float> u = RandomVec(n, 4);
  std::vector<float> sw(g.size()), si = g;
  SwiGlu(g.data(), u.data(), n, sw.data());
  Silu(si.data(), n);
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = SiluRef(g[i]);
    ASSERT_NEAR(si[i], s, 4e-7 * std::fabs(s) + 1e-35) << "x " << g[i];
    ASSERT_NEAR(sw[i], s * u[i], 5e-7 * std::fabs(s * u[i]) + 1e-35) << "x " << g[i];
  }
  float special[4] = {INFINITY, -INFINITY, NAN, 0.0f};
  Silu(special, 4);
  EXPECT_EQ(special[0], INFINITY);
  EXPECT_TRUE(std::isnan(special[1]));  // -inf / (1 + inf), as ggml's formula gives
  EXPECT_TRUE(std::isnan(special[2]));
  EXPECT_EQ(special[3], 0.0f);
}

// log(sum(exp(x))) against a double sum over the same values (NaN left out).
TEST_P(OpsTest, LogSumExpMatchesDouble) {
  auto reference = [](const std::vector<float>& x) {
    double max = -INFINITY;
    for (float v : x) max = v > max ? v : max;
    if (std::isinf(max)) return max;
    double sum = 0.0;
    for (float v : x) {
      if (!std::isnan(v)) sum += std::exp(static_cast<double>(v) - max);
    }
    return max + std::log(sum);
  };
  for (int64_t n : {1, 7, 15, 16, 17, 1000, 151936}) {
    std::vector<float> x = RandomVec(n, static_cast<uint32_t>(n));
    for (float& v : x) v *= 12.0f;  // logits of a real spread
    if (n > 16) {
      x[3] = NAN;
      x[static_cast<size_t>(n) - 2] = -INFINITY;
      x[5] = 40.0f;  // the largest, inside the first vector
    }
    const double want = reference(x);
    EXPECT_NEAR(LogSumExp(x.data(), n), want, 2e-6 * std::fabs(want) + 1e-6) << "n " << n;
  }
  const std::vector<float> none = {-INFINITY, NAN, -INFINITY};
  EXPECT_EQ(LogSumExp(none.data(), 3), -INFINITY);
  EXPECT_EQ(LogSumExp(none.data(), 0), -INFINITY);
  const std::vector<float> big = {1.0f, INFINITY, NAN, 2.0f};
  EXPECT_EQ(LogSumExp(big.data(), 4), INFINITY);
  // The largest value in the last, partial vector; the lanes past n are not read as 0.
  std::vector<float> tail(33, -50.0f);
  tail[32] = -40.0f;
  EXPECT_NEAR(LogSumExp(tail.data(), 33), reference(tail), 1e-5);
}

// ------------------------------------------------------------ delta rule

// S = decay S; delta = beta (v - S^T k); S += k delta^T; out = S^T q, in double.
void DeltaRuleRef(std::vector<double>& s, const std::vector<float>& k, const std::vector<float>& v,
                  const std::vector<float>& q, double decay, double beta, int64_t dk, int64_t dv,
                  std::vector<double>* out) {
  for (double& x : s) x *= decay;
  std::vector<double> delta(static_cast<size_t>(dv));
  for (int64_t c = 0; c < dv; ++c) {
    double kv = 0;
    for (int64_t r = 0; r < dk; ++r) kv += s[static_cast<size_t>(r * dv + c)] * k[static_cast<size_t>(r)];
    delta[static_cast<size_t>(c)] = beta * (v[static_cast<size_t>(c)] - kv);
  }
  out->assign(static_cast<size_t>(dv), 0.0);
  for (int64_t r = 0; r < dk; ++r) {
    for (int64_t c = 0; c < dv; ++c) {
      double& x = s[static_cast<size_t>(r * dv + c)];
      x += k[static_cast<size_t>(r)] * delta[static_cast<size_t>(c)];
      (*out)[static_cast<size_t>(c)] += q[static_cast<size_t>(r)] * x;
    }
  }
}

TEST_P(OpsTest, DeltaRuleMatchesDoubleOverManySteps) {
  // Shapes with tails on every path (16-, 8- and 64-wide blocks) and the
  // real ones (32 x 32 in the reference model, 128 x 128 in Qwen 3.5).
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{32, 32}, {128, 128}, {5, 3}, {17, 70}, {64, 129}}) {
    SCOPED_TRACE(std::to_string(dk) + " x " + std::to_string(dv));
    std::vector<float> s(static_cast<size_t>(dk * dv), 0.0f);
    std::vector<double> s_ref(s.size(), 0.0);
    std::vector<float> delta(static_cast<size_t>(dv)), out(static_cast<size_t>(dv));
    std::vector<double> out_ref;
    for (int step = 0; step < 20; ++step) {
      // Unit-norm k and q as the mixer feeds them (l2-normalised).
      std::vector<float> k = RandomVec(dk, 100 + step), q = RandomVec(dk, 200 + step);
      for (auto* x : {&k, &q}) {
        double n2 = 0;
        for (float f : *x) n2 += static_cast<double>(f) * f;
        for (float& f : *x) f = static_cast<float>(f / std::sqrt(n2));
      }
      const std::vector<float> v = RandomVec(dv, 300 + step);
      const float decay = 0.5f + 0.025f * static_cast<float>(step), beta = 0.9f - 0.03f * static_cast<float>(step);
      DeltaRule(s.data(), k.data(), v.data(), q.data(), decay, beta, dk, dv, delta.data(), out.data());
      DeltaRuleRef(s_ref, k, v, q, decay, beta, dk, dv, &out_ref);
      for (int64_t c = 0; c < dv; ++c) {
        ASSERT_NEAR(out[static_cast<size_t>(c)], out_ref[static_cast<size_t>(c)], 2e-5) << "step " << step << " col " << c;
      }
    }
    for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], s_ref[i], 2e-5) << "state " << i;
  }
}

TEST_P(OpsTest, DeltaRuleDoesNotTouchColumnsPastTheRow) {
  // A state row of 70 values inside a larger buffer: nothing after it changes.
  const int64_t dk = 3, dv = 70;
  std::vector<float> buf(static_cast<size_t>(dk * dv + 64), 7.0f);
  const std::vector<float> k = RandomVec(dk, 1), q = RandomVec(dk, 2), v = RandomVec(dv, 3);
  std::vector<float> delta(static_cast<size_t>(dv) + 64, 5.0f), out(static_cast<size_t>(dv) + 64, 5.0f);
  DeltaRule(buf.data(), k.data(), v.data(), q.data(), 0.9f, 0.5f, dk, dv, delta.data(), out.data());
  for (size_t i = static_cast<size_t>(dk * dv); i < buf.size(); ++i) ASSERT_EQ(buf[i], 7.0f) << i;
  for (size_t i = static_cast<size_t>(dv); i < out.size(); ++i) {
    ASSERT_EQ(out[i], 5.0f) << i;
    ASSERT_EQ(delta[i], 5.0f) << i;
  }
}

TEST_P(OpsTest, VectorOpsDoNotDependOnPositionInTheArray) {
  // SwiGlu over a whole batch must give each element the value it gets alone
  // (batch invariance for the FFN), whether it lands in a full vector or a tail.
  const int64_t n = 77;
  const std::vector<float> g = RandomVec(n, 1, 4.0f), u = RandomVec(n, 2);
  std::vector<float> all(static_cast<size_t>(n));
  SwiGlu(g.data(), u.data(), n, all.data());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t len : {int64_t{1}, std::min<int64_t>(3, n - i), n - i}) {
      std::vector<float> part(static_cast<size_t>(len));
      SwiGlu(&g[static_cast<size_t>(i)], &u[static_cast<size_t>(i)], len, part.data());
      ASSERT_EQ(F32Bits(part[0]), F32Bits(all[static_cast<size_t>(i)]))
          << "i " << i << " len " << len;
    }
    float one = g[static_cast<size_t>(i)];
    Silu(&one, 1);
    std::vector<float> s = g;
    Silu(s.data(), n);
    ASSERT_EQ(F32Bits(one), F32Bits(s[static_cast<size_t>(i)]));
  }
}

TEST_P(OpsTest, ReluSquaredAndAdd) {
  float x[5] = {-2.0f, -0.0f, 0.5f, 3.0f, NAN};
  ReluSquared(x, 5);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[2], 0.25f);
  EXPECT_EQ(x[3], 9.0f);
  float y[3] = {1.0f, 2.0f, 3.0f};
  const float a[3] = {0.5f, -2.0f, 1e-8f};
  Add(a, 3, y);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 3.0f + 1e-8f);
}

// gemma3's GELU through llama.cpp's f16 table: f16(gelu(f16(x))) inside
// (-10, 10), x above, 0 below, times up; within f16 rounding of the exact
// tanh GELU (double) and exactly that rounding's value.
TEST_P(OpsTest, GeGluF16TableRoundsLikeGgml) {
  auto gelu = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  std::vector<float> g(4096), up(4096), out(4096);
  for (size_t i = 0; i < g.size(); ++i) g[i] = dist(rng), up[i] = dist(rng);
  g[0] = -10.0f, g[1] = 10.0f, g[2] = 9.999f, g[3] = -9.999f, g[4] = 0.0f;
  GeGluF16Table(g.data(), up.data(), static_cast<int64_t>(g.size()), out.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const float x = g[i];
    float want;
    if (x <= -10.0f) {
      want = 0.0f;
    } else if (x >= 10.0f) {
      want = x;
    } else {
      const float xh = Fp16ToF32(F32ToFp16(x));
      want = Fp16ToF32(F32ToFp16(static_cast<float>(gelu(xh))));
      // The table's value is the f16 rounding of the exact GELU of f16(x),
      // or its neighbour when the f32 GELU lands on the other side of a tie.
      ASSERT_LE(std::fabs(want - gelu(x)), 1e-3 * std::fabs(gelu(x)) + 1e-3) << x;
    }
    const float got = out[i] / (up[i] == 0.0f ? 1.0f : up[i]);
    EXPECT_NEAR(got, want, 1e-3f * std::fabs(want) + 1e-6f)
        << "x " << x;  // f16 subnormals: 6e-8 apart
  }
  // In place (out aliases gate) gives the same.
  std::vector<float> in_place = g;
  GeGluF16Table(in_place.data(), up.data(), static_cast<int64_t>(g.size()), in_place.data());
  EXPECT_EQ(0, std::memcmp(in_place.data(), out.data(), out.size() * sizeof(float)));
}

// ------------------------------------------------------------- KV rows

TEST_P(OpsTest, StoreKvRowF16IsBitExactRne) {
  std::vector<float> v = RandomVec(3000, 12, 10.0f);
  std::mt19937 rng(13);
  for (int i = 0; i < 3000; ++i) {
    // Every exponent range: subnormal halfs, normals, overflow to inf.
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 50) - 30);
    v.push_back(v[static_cast<size_t>(i)] * scale);
  }
  for (uint32_t h = 0; h < 0x7c00; h += 7) {
    // Exact halfway points between neighbouring halfs (ties to even).
    const float a = Fp16ToF32(static_cast<uint16_t>(h)),
                b = Fp16ToF32(static_cast<uint16_t>(h + 1));
    v.push_back(static_cast<float>((double{a} + b) / 2));
    v.push_back(-static_cast<float>((double{a} + b) / 2));
  }
  for (float f : {65504.0f, 65520.0f, 65519.99f, 1e9f, -1e9f, INFINITY, -INFINITY, 0.0f, -0.0f,
                  5.96e-8f, 2.98e-8f, 2.99e-8f}) {
    v.push_back(f);
  }
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<uint8_t> row(static_cast<size_t>(n) * 2);
  StoreKvRow(DType::kF16, v.data(), n, row.data());
  std::vector<float> back(v.size());
  LoadKvRow(DType::kF16, row.data(), n, back.data());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, &row[2 * i], 2);
    ASSERT_EQ(got, F32ToFp16(v[i])) << "value " << v[i] << " index " << i;
    ASSERT_EQ(F32Bits(back[i]), F32Bits(Fp16ToF32(got)));
  }
  float nan = NAN;
  uint16_t h;
  StoreKvRow(DType::kF16, &nan, 1, reinterpret_cast<uint8_t*>(&h));
  EXPECT_TRUE(std::isnan(Fp16ToF32(h)));
  // F32 rows are copies.
  std::vector<uint8_t> f32row(v.size() * 4);
  StoreKvRow(DType::kF32, v.data(), n, f32row.data());
  LoadKvRow(DType::kF32, f32row.data(), n, back.data());
  EXPECT_EQ(0, std::memcmp(back.data(), v.data(), v.size() * 4));
}

TEST_P(OpsTest, LoadKvRowWidensEveryHalf) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> out(all.size());
  LoadKvRow(DType::kF16, reinterpret_cast<const uint8_t*>(all.data()),
            static_cast<int64_t>(all.size()), out.data());
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float want = Fp16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[h]));
    } else {
      ASSERT_EQ(F32Bits(out[h]), F32Bits(want)) << std::hex << h;
    }
  }
}

// ------------------------------------------------------------- attention

struct AttnCase {
  int n_head, n_kv_head, head_dim;
  int64_t n_pos;
};

// The K/V type pairs the attention tests run: the plain types, the
// quantized ones, and mixed pairs (K and V may differ). Quantized types only
// for head dims that hold whole blocks.
std::vector<std::pair<DType, DType>> KvPairs(int head_dim) {
  std::vector<std::pair<DType, DType>> out = {{DType::kF32, DType::kF32},
                                              {DType::kF16, DType::kF16}};
  if (head_dim % kKvBlockValues == 0) {
    out.insert(out.end(), {{DType::kQ8_0, DType::kQ8_0},
                           {DType::kQ4_0, DType::kQ4_0},
                           {DType::kQ8_0, DType::kQ4_0},
                           {DType::kF16, DType::kQ8_0},
                           {DType::kQ4_0, DType::kF32}});
  }
  return out;
}

std::string PairName(DType k, DType v) { return "K " + DTypeName(k) + " V " + DTypeName(v); }

void CheckAttention(DType k_type, DType v_type, const AttnCase& c) {
  SCOPED_TRACE(PairName(k_type, v_type) + " heads " + std::to_string(c.n_head) + "/" +
               std::to_string(c.n_kv_head) + " dim " + std::to_string(c.head_dim) + " n_pos " +
               std::to_string(c.n_pos));
  const int64_t kv_dim = int64_t{c.n_kv_head} * c.head_dim;
  const size_t k_rb = KvHeadBytes(k_type, c.head_dim) * c.n_kv_head + 8;  // padded rows
  const size_t v_rb = KvHeadBytes(v_type, c.head_dim) * c.n_kv_head + 4;
  std::vector<uint8_t> k(k_rb * static_cast<size_t>(c.n_pos)),
      v(v_rb * static_cast<size_t>(c.n_pos));
  std::vector<float> kf(static_cast<size_t>(kv_dim * c.n_pos)), vf(kf.size());  // as stored
  for (int64_t p = 0; p < c.n_pos; ++p) {
    const std::vector<float> kr = RandomVec(kv_dim, static_cast<uint32_t>(2 * p + 1));
    const std::vector<float> vr = RandomVec(kv_dim, static_cast<uint32_t>(2 * p + 2));
    StoreKvRow(k_type, kr.data(), kv_dim, &k[static_cast<size_t>(p) * k_rb]);
    StoreKvRow(v_type, vr.data(), kv_dim, &v[static_cast<size_t>(p) * v_rb]);
    LoadKvRow(k_type, &k[static_cast<size_t>(p) * k_rb], kv_dim,
              &kf[static_cast<size_t>(p * kv_dim)]);
    LoadKvRow(v_type, &v[static_cast<size_t>(p) * v_rb], kv_dim,
              &vf[static_cast<size_t>(p * kv_dim)]);
  }
  const std::vector<float> q = RandomVec(int64_t{c.n_head} * c.head_dim, 3, 0.5f);
  KvView kv;
  kv.k_type = k_type;
  kv.v_type = v_type;
  kv.k = k.data();
  kv.v = v.data();
  kv.k_row_bytes = k_rb;
  kv.v_row_bytes = v_rb;
  kv.n_kv_head = c.n_kv_head;
  kv.head_dim = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  std::vector<float> out(q.size(), -1.0f),
      scratch(static_cast<size_t>(AttentionScratchFloats(c.n_pos, c.head_dim)));
  AttentionRow(q.data(), c.n_head, kv, c.n_pos, scale, out.data(), scratch.data());

  const int group = c.n_head / c.n_kv_head;
  for (int h = 0; h < c.n_head; ++h) {
    const int64_t off = int64_t{h / group} * c.head_dim;
    std::vector<double> s(static_cast<size_t>(c.n_pos));
    double mx = -INFINITY;
    for (int64_t p = 0; p < c.n_pos; ++p) {
      double dot = 0;
      for (int d = 0; d < c.head_dim; ++d) {
        dot += double{q[static_cast<size_t>(h * c.head_dim + d)]} *
               kf[static_cast<size_t>(p * kv_dim + off + d)];
      }
      s[static_cast<size_t>(p)] = dot * scale;
      mx = std::max(mx, s[static_cast<size_t>(p)]);
    }
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int d = 0; d < c.head_dim; ++d) {
      double o = 0;
      for (int64_t p = 0; p < c.n_pos; ++p)
        o += s[static_cast<size_t>(p)] * vf[static_cast<size_t>(p * kv_dim + off + d)];
      o /= sum;
      ASSERT_NEAR(out[static_cast<size_t>(h * c.head_dim + d)], o, 2e-6)
          << "head " << h << " dim " << d;
    }
  }
}

TEST_P(OpsTest, AttentionRowMatchesDouble) {
  const AttnCase cases[] = {{4, 2, 32, 1},   {4, 2, 64, 7},   {6, 2, 64, 100}, {2, 2, 40, 33},
                            {8, 1, 128, 65}, {3, 3, 24, 300}, {1, 1, 80, 2},   {4, 2, 128, 77},
                            {2, 1, 200, 45}, {3, 1, 136, 90}};
  for (const AttnCase& c : cases) {
    for (const auto& [kt, vt] : KvPairs(c.head_dim)) CheckAttention(kt, vt, c);
  }
}

// K/V rows of n_pos positions, kv_dim values each, of the given types
// (random values, seeds from `seed`), and a view of them.
struct KvRows {
  std::vector<uint8_t> k, v;
  KvView view;
};
KvRows MakeKvRows(DType kt, DType vt, int n_kv, int hd, int64_t n_pos, uint32_t seed) {
  const int64_t kv_dim = int64_t{n_kv} * hd;
  KvRows r;
  const size_t k_rb = KvHeadBytes(kt, hd) * n_kv, v_rb = KvHeadBytes(vt, hd) * n_kv;
  r.k.resize(k_rb * static_cast<size_t>(n_pos));
  r.v.resize(v_rb * static_cast<size_t>(n_pos));
  for (int64_t p = 0; p < n_pos; ++p) {
    StoreKvRow(kt, RandomVec(kv_dim, seed + static_cast<uint32_t>(p)).data(), kv_dim,
               &r.k[static_cast<size_t>(p) * k_rb]);
    StoreKvRow(vt, RandomVec(kv_dim, seed + 1000 + static_cast<uint32_t>(p)).data(), kv_dim,
               &r.v[static_cast<size_t>(p) * v_rb]);
  }
  r.view = KvView{kt, vt, r.k.data(), r.v.data(), k_rb, v_rb, n_kv, hd};
  return r;
}

// A view of kv head h's slices only.
KvView OneHead(const KvView& kv, int kv_head) {
  KvView one = kv;
  one.k += static_cast<size_t>(kv_head) * KvHeadBytes(kv.k_type, kv.head_dim);
  one.v += static_cast<size_t>(kv_head) * KvHeadBytes(kv.v_type, kv.head_dim);
  one.n_kv_head = 1;
  return one;
}

TEST_P(OpsTest, AttentionRowPerHeadCallsMatchAllHeads) {
  // The engine may call one head at a time with a view offset to its kv head.
  for (int hd : {48, 64}) {
    for (const auto& [kt, vt] : KvPairs(hd)) {
      SCOPED_TRACE(PairName(kt, vt) + " head_dim " + std::to_string(hd));
      const int n_head = 4, n_kv = 2;
      const int64_t n_pos = 29;
      const KvRows rows = MakeKvRows(kt, vt, n_kv, hd, n_pos, 0);
      const KvView& kv = rows.view;
      const std::vector<float> q = RandomVec(n_head * hd, 4);
      std::vector<float> all(q.size()),
          scratch(static_cast<size_t>(AttentionScratchFloats(n_pos, hd)));
      AttentionRow(q.data(), n_head, kv, n_pos, 0.125f, all.data(), scratch.data());
      for (int h = 0; h < n_head; ++h) {
        const KvView one = OneHead(kv, h / (n_head / n_kv));
        std::vector<float> out(static_cast<size_t>(hd));
        AttentionRow(&q[static_cast<size_t>(h * hd)], 1, one, n_pos, 0.125f, out.data(),
                     scratch.data());
        ASSERT_EQ(0, std::memcmp(out.data(), &all[static_cast<size_t>(h * hd)],
                                 static_cast<size_t>(hd) * 4))
            << h;
      }
    }
  }
}

TEST_P(OpsTest, AttentionRowsIsBitIdenticalToAttentionRowPerQuery) {
  // Prompt reading batches queries of one sequence; each query must get the
  // bytes it gets alone (batch invariance), whatever the tile it lands in.
  // Groups of 3 and 2 heads per kv head (generation sets of up to 3 and 2
  // rows), head dims that take one or two passes over the V rows.
  for (auto [hd, n_head] : {std::pair{64, 6}, {40, 6}, {128, 6}, {128, 4}, {200, 4}, {96, 4}}) {
    for (const auto& [kt, vt] : KvPairs(hd)) {
      SCOPED_TRACE(PairName(kt, vt) + " head_dim " + std::to_string(hd) + " heads " +
                   std::to_string(n_head));
      const int n_kv = 2;
      const int64_t max_pos = 150;
      const KvRows rows = MakeKvRows(kt, vt, n_kv, hd, max_pos, 0);
      const KvView& kv = rows.view;
      const int64_t n_q = 11, dim = int64_t{n_head} * hd;
      const std::vector<float> q = RandomVec(n_q * dim, 7);
      // Causal positions 117..127 (33 rows per kv head: two row sets, two key
      // blocks), then an uneven set including an empty one.
      for (const std::vector<int64_t>& n_pos :
           {std::vector<int64_t>{117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127},
            std::vector<int64_t>{150, 1, 33, 0, 5, 69, 2, 64, 65, 63, 4}}) {
        std::vector<float> batched(static_cast<size_t>(n_q * dim), -1.0f);
        std::vector<float> scratch(static_cast<size_t>(AttentionScratchFloats(max_pos, hd)));
        AttentionRows(q.data(), dim, n_q, n_head, kv, n_pos.data(), 0.2f, batched.data(), dim,
                      scratch.data());
        for (int64_t i = 0; i < n_q; ++i) {
          std::vector<float> alone(static_cast<size_t>(dim));
          AttentionRow(&q[static_cast<size_t>(i * dim)], n_head, kv, n_pos[static_cast<size_t>(i)],
                       0.2f, alone.data(), scratch.data());
          ASSERT_EQ(0, std::memcmp(alone.data(), &batched[static_cast<size_t>(i * dim)],
                                   alone.size() * 4))
              << "query " << i << " n_pos " << n_pos[static_cast<size_t>(i)];
          if (n_pos[static_cast<size_t>(i)] == 0) {
            for (float f : alone) ASSERT_EQ(f, 0.0f);
          }
        }
        // One call per head through a one-kv-head view (how the engine splits
        // the work when a batch has few queries) gives the same bytes too.
        std::vector<float> per_head(batched.size(), -1.0f);
        for (int h = 0; h < n_head; ++h) {
          const KvView one = OneHead(kv, h / (n_head / n_kv));
          AttentionRows(&q[static_cast<size_t>(h * hd)], dim, n_q, 1, one, n_pos.data(), 0.2f,
                        &per_head[static_cast<size_t>(h * hd)], dim, scratch.data());
        }
        ASSERT_EQ(0, std::memcmp(per_head.data(), batched.data(), batched.size() * 4));
      }
    }
  }
}

}  // namespace
}  // namespace mx::kernels
