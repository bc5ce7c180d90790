// RoPE on every path (kernels::Rope, RopeMulti): both pair modes, positions
// that compose, multi-section positions, the frequency ladder, and the
// scaling variants real files carry (YaRN, frequency factors, LongRoPE
// factors, the rotation-only shift), against double references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/kernels_test_util.h"

namespace mx::kernels {
namespace {

using RopeTest = IsaTest;
INSTANTIATE_TEST_SUITE_P(Paths, RopeTest, ::testing::ValuesIn(AvailableIsas()), IsaParamName);


// Reference: angles built as llama.cpp builds them (iterative f32 products,
// which the spec requires), cos/sin and the rotation in double.
std::vector<float> RopeRef(const std::vector<float>& x, int n_heads, int head_dim,
                           const RopeParams& p, int64_t pos) {
  std::vector<float> out = x;
  const int half = p.n_rot / 2;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const double angle = double{p.freq_scale * theta};
    const double c = std::cos(angle), s = std::sin(angle);
    for (int h = 0; h < n_heads; ++h) {
      const size_t a = static_cast<size_t>(h * head_dim + (p.mode == RopeMode::kNeox ? i : 2 * i));
      const size_t b = a + (p.mode == RopeMode::kNeox ? static_cast<size_t>(half) : 1);
      out[a] = static_cast<float>(x[a] * c - x[b] * s);
      out[b] = static_cast<float>(x[a] * s + x[b] * c);
    }
    theta *= theta_scale;
  }
  return out;
}

TEST_P(RopeTest, RopeBothModesMatchReference) {
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    for (int n_rot : {32, 64}) {
      RopeParams p;
      p.n_rot = n_rot;
      p.mode = mode;
      p.freq_base = mode == RopeMode::kNeox ? 1e6f : 1e4f;
      p.freq_scale = n_rot == 64 ? 0.5f : 1.0f;
      const int n_heads = 3, head_dim = 64;
      for (int64_t pos : {0, 1, 17, 1000, 32767}) {
        const std::vector<float> x =
            RandomVec(n_heads * head_dim, static_cast<uint32_t>(pos + n_rot));
        std::vector<float> got = x;
        Rope(got.data(), n_heads, head_dim, p, pos);
        const std::vector<float> want = RopeRef(x, n_heads, head_dim, p, pos);
        for (size_t i = 0; i < x.size(); ++i) {
          // cosf/sinf are within an ulp of the double values of the same f32 angle.
          ASSERT_NEAR(got[i], want[i], 1e-6)
              << "mode " << static_cast<int>(mode) << " pos " << pos << " i " << i;
        }
        // Dims >= n_rot are untouched.
        for (int h = 0; h < n_heads; ++h) {
          for (int d = n_rot; d < head_dim; ++d) {
            const size_t i = static_cast<size_t>(h * head_dim + d);
            ASSERT_EQ(got[i], x[i]);
          }
        }
      }
    }
  }
}

TEST_P(RopeTest, RopeComposesAcrossPositions) {
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    RopeParams p;
    p.n_rot = 64;
    p.mode = mode;
    const std::vector<float> x = RandomVec(2 * 64, 5);
    const struct { int64_t a, b; } cases[] = {{37, 21}, {100, -40}, {5, 0}, {250, -250}};
    for (const auto& c : cases) {
      std::vector<float> twice = x, once = x;
      Rope(twice.data(), 2, 64, p, c.a);
      Rope(twice.data(), 2, 64, p, c.b);
      Rope(once.data(), 2, 64, p, c.a + c.b);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_NEAR(twice[i], once[i], 1e-5) << "a " << c.a << " b " << c.b << " i " << i;
      }
    }
  }
}

// IMRoPE: a text row is plain NeoX RoPE bit for bit; an image row rotates
// each pair by the component its sector names (sections [3, 3, 2, 0] over 8
// pairs: t for pairs 0, 3, 6; h for 1, 4, 7; w for 2, 5), checked against
// exact angles pos * base^(-2i/n_rot).
TEST_P(RopeTest, RopeMultiPicksEachPairsComponent) {
  RopeParams p;
  p.n_rot = 16;
  p.mode = RopeMode::kNeox;
  p.freq_base = 1e7f;
  const int sections[4] = {3, 3, 2, 0};
  const std::vector<float> x = RandomVec(2 * 64, 11);
  for (int64_t pos : {0, 7, 300}) {
    std::vector<float> plain = x, multi = x;
    Rope(plain.data(), 2, 64, p, pos);
    RopeMulti(multi.data(), 2, 64, p, sections, RopePos::Text(pos));
    ASSERT_EQ(0, std::memcmp(plain.data(), multi.data(), x.size() * sizeof(float))) << pos;
  }
  const RopePos img{34, 36, 38, 0};
  const int picks[8] = {0, 1, 2, 0, 1, 2, 0, 1};
  std::vector<float> got = x;
  RopeMulti(got.data(), 2, 64, p, sections, img);
  const int64_t comp[3] = {img.t, img.h, img.w};
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 8; ++i) {
      const double angle =
          static_cast<double>(comp[picks[i]]) * std::pow(1e7, -2.0 * i / 16.0);
      const size_t a = static_cast<size_t>(h * 64 + i), b = a + 8;
      EXPECT_NEAR(got[a], x[a] * std::cos(angle) - x[b] * std::sin(angle), 1e-4) << i;
      EXPECT_NEAR(got[b], x[a] * std::sin(angle) + x[b] * std::cos(angle), 1e-4) << i;
    }
    for (int d = 16; d < 64; ++d) EXPECT_EQ(got[h * 64 + d], x[h * 64 + d]);
  }
}

TEST_P(RopeTest, RopeAnglesFollowTheFrequencyLadder) {
  // Against exact angles pos * base^(-2i/n) at a small position, where f32
  // angle construction error is far below the tolerance: catches pairing or
  // frequency mistakes independently of RopeRef.
  RopeParams p;
  p.n_rot = 16;
  p.mode = RopeMode::kNormal;
  std::vector<float> x(16, 0.0f);
  for (int i = 0; i < 8; ++i) x[static_cast<size_t>(2 * i)] = 1.0f;  // (1, 0) pairs
  Rope(x.data(), 1, 16, p, 3);
  for (int i = 0; i < 8; ++i) {
    const double angle = 3.0 * std::pow(10000.0, -2.0 * i / 16);
    EXPECT_NEAR(x[static_cast<size_t>(2 * i)], std::cos(angle), 2e-6) << i;
    EXPECT_NEAR(x[static_cast<size_t>(2 * i + 1)], std::sin(angle), 2e-6) << i;
  }
}

TEST_P(RopeTest, RopeYarnAndFreqFactorsDefaultsAreNeutral) {
  RopeParams p;
  p.n_rot = 32;
  const std::vector<float> ff(16, 1.0f);
  const std::vector<float> x = RandomVec(64, 9);
  std::vector<float> a = x, b = x;
  Rope(a.data(), 2, 32, p, 123);
  p.freq_factors = ff.data();
  Rope(b.data(), 2, 32, p, 123);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  // With YaRN on, the magnitude scale 1 + 0.1 ln(1/freq_scale) applies to every pair.
  RopeParams y;
  y.n_rot = 32;
  y.freq_scale = 0.25f;
  y.ext_factor = 1.0f;
  y.n_ctx_orig = 4096;
  std::vector<float> z(32, 0.0f);
  z[0] = 1.0f;
  Rope(z.data(), 1, 32, y, 0);  // angle 0: cos = mscale
  EXPECT_NEAR(z[0], 1.0f + 0.1f * std::log(4.0f), 1e-6);
}

// Reference for the scaled RoPE variants, from their formulas
// (ref/README-dense.md): pair i's frequency f_i = base^(-2i/n_rot) (built as
// llama.cpp builds it, iterative f32 products), divided by freq_factors[i];
// YaRN (ext_factor 1) keeps f_i for i <= lo, interpolates f_i * freq_scale
// for i >= hi and blends linearly between, lo = floor(c(beta_fast)),
// hi = ceil(c(beta_slow)), c(b) = n_rot ln(C / (2 pi b)) / (2 ln base);
// cos and sin times attn_factor (YaRN: times 1 + 0.1 ln(1 / freq_scale)).
// Angles, ramps and rotation in double.
std::vector<float> ScaledRopeRef(const std::vector<float>& x, int n_heads, int head_dim,
                                 const RopeParams& p, int64_t pos) {
  std::vector<float> out = x;
  const int half = p.n_rot / 2;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  auto corr = [&](double beta) {
    return p.n_rot * std::log(p.n_ctx_orig / (2 * M_PI * beta)) / (2 * std::log(double{p.freq_base}));
  };
  const double lo = std::max(0.0, std::floor(corr(p.beta_fast)));
  const double hi = std::min(p.n_rot - 1.0, std::ceil(corr(p.beta_slow)));
  double mscale = p.attn_factor;
  if (p.ext_factor != 0) mscale *= 1 + 0.1 * std::log(1.0 / p.freq_scale);
  if (p.rotation_only) mscale = 1;
  float f = 1.0f;
  for (int i = 0; i < half; ++i) {
    double freq = double{f} / (p.freq_factors != nullptr ? p.freq_factors[i] : 1.0);
    if (p.ext_factor != 0) {
      const double r = 1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
      freq *= r + (1 - r) * p.freq_scale;
    } else {
      freq *= p.freq_scale;
    }
    const double angle = static_cast<double>(pos) * freq;
    const double c = std::cos(angle) * mscale, s = std::sin(angle) * mscale;
    for (int h = 0; h < n_heads; ++h) {
      const size_t a = static_cast<size_t>(h * head_dim + (p.mode == RopeMode::kNeox ? i : 2 * i));
      const size_t b = a + (p.mode == RopeMode::kNeox ? static_cast<size_t>(half) : 1);
      out[a] = static_cast<float>(x[a] * c - x[b] * s);
      out[b] = static_cast<float>(x[a] * s + x[b] * c);
    }
    f *= theta_scale;
  }
  return out;
}

// Frequency factors (Llama 3.1 table, LongRoPE), YaRN and the attention
// factor, alone and together, in both modes and with partial rotation.
TEST_P(RopeTest, RopeScalingVariantsMatchReference) {
  // Llama 3.1's table shape: 1 for the fast pairs, 8 for the slow ones, a smooth step between.
  std::vector<float> llama3(32);
  for (int i = 0; i < 32; ++i) llama3[static_cast<size_t>(i)] = i < 15 ? 1.0f : i > 17 ? 8.0f : 1.5f + (i - 15) * 1.8f;
  std::vector<float> longrope(8);
  for (int i = 0; i < 8; ++i) longrope[static_cast<size_t>(i)] = 1.0f + 3.1f * i;
  struct Case {
    const char* what;
    RopeMode mode;
    int n_rot, head_dim;
    float base, freq_scale, ext_factor, attn_factor;
    int n_ctx_orig;
    const float* ff;
    bool rotation_only;
  };
  const Case cases[] = {
      {"rope_freqs", RopeMode::kNormal, 64, 64, 5e5f, 1.0f, 0.0f, 1.0f, 0, llama3.data(), false},
      {"yarn", RopeMode::kNeox, 64, 64, 1e6f, 0.25f, 1.0f, 1.0f, 512, nullptr, false},
      {"yarn attn_factor", RopeMode::kNeox, 64, 64, 1e6f, 0.25f, 1.0f, 0.8f, 512, nullptr, false},
      {"yarn normal", RopeMode::kNormal, 32, 48, 1e4f, 0.125f, 1.0f, 1.0f, 2048, nullptr, false},
      {"longrope partial", RopeMode::kNeox, 16, 32, 1e4f, 1.0f, 0.0f, 1.1055f, 512, longrope.data(), false},
      {"yarn + factors", RopeMode::kNeox, 64, 64, 1e6f, 0.25f, 1.0f, 1.0f, 512, llama3.data(), false},
      {"rotation only", RopeMode::kNeox, 64, 64, 1e6f, 0.25f, 1.0f, 0.8f, 512, llama3.data(), true},
  };
  const int n_heads = 3;
  for (const Case& c : cases) {
    RopeParams p;
    p.mode = c.mode;
    p.n_rot = c.n_rot;
    p.freq_base = c.base;
    p.freq_scale = c.freq_scale;
    p.ext_factor = c.ext_factor;
    p.attn_factor = c.attn_factor;
    p.n_ctx_orig = c.n_ctx_orig;
    p.freq_factors = c.ff;
    p.rotation_only = c.rotation_only;
    for (int64_t pos : {0, 1, 17, 600, 4000, -250}) {
      const std::vector<float> x =
          RandomVec(n_heads * c.head_dim, static_cast<uint32_t>(pos + 7 * c.n_rot + 1000));
      std::vector<float> got = x;
      Rope(got.data(), n_heads, c.head_dim, p, pos);
      const std::vector<float> want = ScaledRopeRef(x, n_heads, c.head_dim, p, pos);
      // The kernel rounds each angle to f32 (ulp ~ 6e-8 |angle|), the reference does not.
      const double tol = 2e-6 + 5e-7 * static_cast<double>(std::llabs(pos));
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol) << c.what << " pos " << pos << " i " << i;
        if (static_cast<int>(i) % c.head_dim >= c.n_rot) {
          ASSERT_EQ(got[i], x[i]) << c.what;
        }
      }
    }
  }
}

// A context shift re-rotates scaled keys by the position delta without
// scaling them again: rotate(a) then rotate_only(b) = rotate(a + b).
TEST_P(RopeTest, RotationOnlyShiftComposesWithScaledRope) {
  std::vector<float> ff(32);
  for (int i = 0; i < 32; ++i) ff[static_cast<size_t>(i)] = 1.0f + 0.25f * i;
  RopeParams p;
  p.mode = RopeMode::kNeox;
  p.n_rot = 64;
  p.freq_base = 1e6f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.attn_factor = 0.9f;
  p.n_ctx_orig = 512;
  p.freq_factors = ff.data();
  RopeParams shift = p;
  shift.rotation_only = true;
  const std::vector<float> x = RandomVec(2 * 64, 11);
  for (const auto& [a, b] : {std::pair<int64_t, int64_t>{300, -140}, {50, -50}, {7, 3}}) {
    std::vector<float> twice = x, once = x;
    Rope(twice.data(), 2, 64, p, a);
    Rope(twice.data(), 2, 64, shift, b);
    Rope(once.data(), 2, 64, p, a + b);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(twice[i], once[i], 1e-4) << a << " " << b;
  }
}

}  // namespace
}  // namespace mx::kernels
