// The qwen3vl_merger encoder against llama.cpp's recorded tensors for the
// three reference pictures (../shared/ref/README.md, "qwen35 vision"): each
// step fed llama.cpp's tensor of the step before (1e-5; GELU stages one
// float16 ulp of the output), end to end from the pixels (1e-3), and
// bit-identical results with any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "core/fp16.h"
#include "vision/vision_internal.h"
#include "vision/vision_test_util.h"

namespace mx::vision {
namespace {

using internal::Grid;
using test::LoadRefImage;
using test::MaxAbsDiff;
using test::RefImage;

constexpr float kStageTol = 1e-5f;
constexpr float kEndToEndTol = 1e-3f;

// Distance between a and b in float16 ulps at b's magnitude.
float F16Ulps(float a, float b) {
  const float mag = std::max(std::fabs(b), 6.1e-5f);  // smallest normal f16
  const float ulp = std::ldexp(1.0f, std::ilogb(mag) - 10);
  return std::fabs(a - b) / ulp;
}

float MaxF16Ulps(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, F16Ulps(a[i], b[i]));
  return m;
}

// Prints one measured difference (the report reads these lines).
void Report(const std::string& image, const std::string& stage, float diff, const char* unit = "") {
  std::printf("  [%s] %-18s %.3g%s\n", image.c_str(), stage.c_str(), diff, unit);
}

class StageTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    proj_ = test::LoadTiny();
    ASSERT_NE(proj_, nullptr);
  }
  const ProjectorConfig& c() const { return proj_->config(); }
  const internal::EncoderWeights& w() const { return proj_->weights(); }
  std::unique_ptr<Projector> proj_;
  ThreadPool pool_{2};
};

TEST_P(StageTest, PatchAndPositionStagesMatchLlamaCpp) {
  const RefImage& r = LoadRefImage(GetParam());
  const Grid g{r.npx, r.npy};
  const int64_t e = c().n_embd, n = g.n();

  std::vector<float> patches(static_cast<size_t>(n * e));
  internal::PatchEmbed(w(), c().patch_size, r.pixels.data(), g, &pool_, patches.data());
  const float d_patch = MaxAbsDiff(patches, r.Stage("patch_bias"));
  Report(r.key, "patch_bias", d_patch);
  EXPECT_LE(d_patch, kStageTol);

  const std::vector<float> pos =
      internal::ResizePositionGrid(w().pos_grid.data(), w().pos_side, e, g);
  std::vector<float> planar(pos.size());
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < e; ++i) planar[static_cast<size_t>(i * n + p)] = pos[p * e + i];
  }
  const float d_pos = MaxAbsDiff(planar, r.Stage("pos_embd_interp"));
  Report(r.key, "pos_embd_interp", d_pos);
  EXPECT_LE(d_pos, kStageTol);

  // inp_pos_emb from the recorded patch embeddings and grid.
  std::span<const float> rec_pos = r.Stage("pos_embd_interp");
  std::vector<float> raster(pos.size());
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < e; ++i) raster[p * e + i] = rec_pos[static_cast<size_t>(i * n + p)];
  }
  std::vector<float> x = r.StageCopy("patch_bias");
  internal::AddPositions(raster.data(), g, e, x.data());
  const float d_inp = MaxAbsDiff(x, r.Stage("inp_pos_emb"));
  Report(r.key, "inp_pos_emb", d_inp);
  EXPECT_LE(d_inp, kStageTol);
}

TEST_P(StageTest, BlockStagesMatchLlamaCpp) {
  const RefImage& r = LoadRefImage(GetParam());
  const Grid g{r.npx, r.npy};
  const int64_t e = c().n_embd, n = g.n(), d = c().head_dim(), n_ff = c().n_ff;
  for (int64_t il = 0; il < c().n_layer; ++il) {
    const internal::BlockWeights& b = w().blocks[static_cast<size_t>(il)];
    const std::string sfx = "-" + std::to_string(il);
    const std::vector<float> input =
        r.StageCopy(il == 0 ? "inp_pos_emb" : "layer_out-" + std::to_string(il - 1));
    auto check = [&](const std::string& name, const std::vector<float>& got) {
      const float diff = MaxAbsDiff(got, r.Stage(name + sfx));
      Report(r.key, name + sfx, diff);
      EXPECT_LE(diff, kStageTol) << name + sfx;
    };

    std::vector<float> h(static_cast<size_t>(n * e));
    internal::LayerNorm(input.data(), n, e, b.ln1_w.data(), b.ln1_b.data(), c().eps, h.data(),
                        &pool_);
    check("ln1", h);

    // q, k after RoPE from the recorded ln1; v too (it has no stage of its own).
    const std::vector<float> ln1 = r.StageCopy("ln1" + sfx);
    std::vector<float> qkv(static_cast<size_t>(n * 3 * e));
    internal::Linear(b.qkv, b.qkv_b, ln1.data(), n, qkv.data(), &pool_);
    internal::RopeVision(qkv.data(), 3 * e, g, c().n_head, d, &pool_);
    internal::RopeVision(qkv.data() + e, 3 * e, g, c().n_head, d, &pool_);
    std::vector<float> q(static_cast<size_t>(n * e)), k(q.size()), v(q.size());
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < e; ++i) {
        q[t * e + i] = qkv[t * 3 * e + i];
        k[t * e + i] = qkv[t * 3 * e + e + i];
        v[t * e + i] = qkv[t * 3 * e + 2 * e + i];
      }
    }
    check("Qcur_rope", q);
    check("Kcur_rope", k);

    const std::vector<float> rq = r.StageCopy("Qcur_rope" + sfx);
    const std::vector<float> rk = r.StageCopy("Kcur_rope" + sfx);
    std::vector<float> att(static_cast<size_t>(n * e));
    internal::Attention(rq.data(), rk.data(), v.data(), e, n, c().n_head, d, att.data(), e, &pool_);
    check("kqv_out", att);

    internal::Linear(b.out, b.out_b, r.Stage("kqv_out" + sfx).data(), n, h.data(), &pool_);
    check("attn_out", h);

    std::vector<float> res = r.StageCopy("attn_out" + sfx);
    kernels::Add(input.data(), n * e, res.data());
    check("ffn_inp", res);

    internal::LayerNorm(r.Stage("ffn_inp" + sfx).data(), n, e, b.ln2_w.data(), b.ln2_b.data(),
                        c().eps, h.data(), &pool_);
    check("ffn_inp_normed", h);

    std::vector<float> ff(static_cast<size_t>(n * n_ff));
    internal::Linear(b.up, b.up_b, r.Stage("ffn_inp_normed" + sfx).data(), n, ff.data(), &pool_);
    internal::Gelu(ff.data(), n * n_ff, &pool_);
    const float ulps = MaxF16Ulps(ff, r.Stage("ffn_gelu" + sfx));
    Report(r.key, "ffn_gelu" + sfx, ulps, " f16 ulp");
    Report(r.key, "ffn_gelu" + sfx + " abs", MaxAbsDiff(ff, r.Stage("ffn_gelu" + sfx)));
    EXPECT_LE(ulps, 1.0f) << "ffn_gelu" + sfx;

    internal::Linear(b.down, b.down_b, r.Stage("ffn_gelu" + sfx).data(), n, h.data(), &pool_);
    check("ffn_out", h);

    res = r.StageCopy("ffn_out" + sfx);
    kernels::Add(r.Stage("ffn_inp" + sfx).data(), n * e, res.data());
    check("layer_out", res);
  }
}

TEST_P(StageTest, MergerStagesMatchLlamaCpp) {
  const RefImage& r = LoadRefImage(GetParam());
  const int64_t e = c().n_embd, n = r.npx * r.npy, nm = n / 4;
  const std::string norm = "norm_b-" + std::to_string(c().n_layer);

  std::vector<float> h(static_cast<size_t>(n * e));
  internal::LayerNorm(r.Stage("layer_out-" + std::to_string(c().n_layer - 1)).data(), n, e,
                      w().post_ln_w.data(), w().post_ln_b.data(), c().eps, h.data(), &pool_);
  const float d_norm = MaxAbsDiff(h, r.Stage(norm));
  Report(r.key, norm, d_norm);
  EXPECT_LE(d_norm, kStageTol);

  std::vector<float> ff(static_cast<size_t>(nm * 4 * e));
  internal::Linear(w().mm0, w().mm0_b, r.Stage(norm).data(), nm, ff.data(), &pool_);
  internal::Gelu(ff.data(), nm * 4 * e, &pool_);
  const float ulps = MaxF16Ulps(ff, r.Stage("ffn_gelu"));
  Report(r.key, "ffn_gelu", ulps, " f16 ulp");
  EXPECT_LE(ulps, 1.0f);

  std::vector<float> out(static_cast<size_t>(nm * c().n_embd_out));
  internal::Linear(w().mm2, w().mm2_b, r.Stage("ffn_gelu").data(), nm, out.data(), &pool_);
  const float d_out = MaxAbsDiff(out, r.embd);
  Report(r.key, "embeddings", d_out);
  EXPECT_LE(d_out, kStageTol);
}

TEST_P(StageTest, EndToEndMatchesLlamaCpp) {
  const RefImage& r = LoadRefImage(GetParam());
  std::map<std::string, std::vector<float>> seen;
  const StageFn hook = [&](std::string_view name, std::span<const float> data) {
    seen[std::string(name)] = std::vector<float>(data.begin(), data.end());
  };
  auto out = proj_->Encode(r.pixels, r.width, r.height, &pool_, &hook);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->nx, r.nx);
  EXPECT_EQ(out->ny, r.ny);
  const float diff = MaxAbsDiff(out->data, r.embd);
  Report(r.key, "end to end", diff);
  EXPECT_LE(diff, kEndToEndTol);
  // Every recorded stage was emitted under its name, with its size.
  EXPECT_EQ(seen.size(), r.stages.size());
  for (const auto& [name, where] : r.stages) {
    auto it = seen.find(name);
    ASSERT_NE(it, seen.end()) << name;
    EXPECT_EQ(it->second.size(), where.second) << name;
    Report(r.key, "chained " + name, MaxAbsDiff(it->second, r.Stage(name)));
  }
}

INSTANTIATE_TEST_SUITE_P(Images, StageTest, ::testing::Values("a", "b", "c"));

TEST(EncoderTest, SameBitsWithAnyThreadCount) {
  auto proj = test::LoadTiny();
  ASSERT_NE(proj, nullptr);
  // A larger picture than the references: 14 x 20 patches, 9 attention tiles.
  const int64_t width = 320, height = 224;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> pixels(static_cast<size_t>(3 * width * height));
  for (float& v : pixels) v = dist(rng);
  auto base = proj->Encode(pixels, width, height, nullptr);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(base->nx, 10);
  EXPECT_EQ(base->ny, 7);
  for (int n_threads : {1, 2, 3}) {
    ThreadPool pool(n_threads);
    auto out = proj->Encode(pixels, width, height, &pool);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(out->data.size(), base->data.size());
    EXPECT_EQ(std::memcmp(out->data.data(), base->data.data(), base->data.size() * sizeof(float)),
              0)
        << n_threads << " threads";
  }
  const RefImage& r = LoadRefImage("a");
  ThreadPool one(1), two(2);
  auto a1 = proj->Encode(r.pixels, r.width, r.height, &one);
  auto a2 = proj->Encode(r.pixels, r.width, r.height, &two);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(std::memcmp(a1->data.data(), a2->data.data(), a1->data.size() * sizeof(float)), 0);
}

// The README's formula in double, separable: out[i] = sum_j w_ij G_j / sum_j w_ij
// with w_ij = max(0, 1 - |j + 0.5 - (i + 0.5) / s| / max(1, 1 / s)) per axis.
std::vector<double> ResizeReference(const std::vector<float>& grid, int64_t side, int64_t e,
                                    int64_t npx, int64_t npy) {
  auto weights = [&](int64_t n_out) {
    std::vector<double> wts(static_cast<size_t>(n_out * side));
    const double s = static_cast<double>(n_out) / static_cast<double>(side);
    const double sigma = std::max(1.0, 1.0 / s);
    for (int64_t i = 0; i < n_out; ++i) {
      double sum = 0.0;
      for (int64_t j = 0; j < side; ++j) {
        const double wij = std::max(0.0, 1.0 - std::fabs(j + 0.5 - (i + 0.5) / s) / sigma);
        wts[static_cast<size_t>(i * side + j)] = wij;
        sum += wij;
      }
      for (int64_t j = 0; j < side; ++j) wts[static_cast<size_t>(i * side + j)] /= sum;
    }
    return wts;
  };
  const std::vector<double> wx = weights(npx), wy = weights(npy);
  std::vector<double> out(static_cast<size_t>(npx * npy * e), 0.0);
  for (int64_t r = 0; r < npy; ++r) {
    for (int64_t c = 0; c < npx; ++c) {
      for (int64_t sr = 0; sr < side; ++sr) {
        for (int64_t sc = 0; sc < side; ++sc) {
          const double wt = wy[r * side + sr] * wx[c * side + sc];
          if (wt == 0.0) continue;
          for (int64_t i = 0; i < e; ++i) {
            out[(r * npx + c) * e + i] += wt * grid[(sr * side + sc) * e + i];
          }
        }
      }
    }
  }
  return out;
}

TEST(EncoderTest, PositionGridResizeFollowsTheFormulaIncludingIdentity) {
  auto proj = test::LoadTiny();
  ASSERT_NE(proj, nullptr);
  const internal::EncoderWeights& w = proj->weights();
  const int64_t s = w.pos_side, e = proj->config().n_embd;
  ASSERT_EQ(s, 6);
  // Identity: a 96x96 picture has the grid's own 6x6 size.
  const std::vector<float> same = internal::ResizePositionGrid(w.pos_grid.data(), s, e, {6, 6});
  EXPECT_EQ(same, w.pos_grid);
  for (auto [npx, npy] : std::vector<std::pair<int64_t, int64_t>>{
           {10, 6}, {10, 4}, {6, 2}, {2, 2}, {14, 20}, {48, 8}, {4, 12}}) {
    const std::vector<float> got =
        internal::ResizePositionGrid(w.pos_grid.data(), s, e, {npx, npy});
    const std::vector<double> want = ResizeReference(w.pos_grid, s, e, npx, npy);
    double m = 0.0;
    for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::fabs(got[i] - want[i]));
    EXPECT_LE(m, 2e-6) << npx << "x" << npy;
  }
  // One axis at the grid's size is unchanged along that axis.
  const std::vector<float> rows = internal::ResizePositionGrid(w.pos_grid.data(), s, e, {6, 4});
  const std::vector<double> want = ResizeReference(w.pos_grid, s, e, 6, 4);
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_NEAR(rows[i], want[i], 2e-6);
}

TEST(EncoderTest, GeluTableIsFloat16OfTheTanhApproximation) {
  auto gelu = [](double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  for (float x : {-9.5f, -3.0f, -1.0f, -0.1f, 0.0f, 0.3f, 1.0f, 2.5f, 9.9f}) {
    const uint16_t h = F32ToFp16(x);
    const float want = Fp16ToF32(F32ToFp16(static_cast<float>(gelu(Fp16ToF32(h)))));
    EXPECT_NEAR(Fp16ToF32(internal::GeluF16(h)), want, 1e-3f * std::fabs(want) + 1e-7f) << x;
  }
  std::vector<float> v = {-20.0f, -10.0f, 10.0f, 12.5f, 1.0f, 0.0f};
  internal::Gelu(v.data(), static_cast<int64_t>(v.size()), nullptr);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 10.0f);
  EXPECT_EQ(v[3], 12.5f);  // x itself, not rounded to f16
  EXPECT_EQ(v[4], Fp16ToF32(internal::GeluF16(F32ToFp16(1.0f))));
  EXPECT_EQ(v[5], 0.0f);
  // gelu_quick: x * sigmoid(1.702 x), through the table for every x.
  std::vector<float> q = {1.0f, -2.0f, 20.0f};
  internal::GeluQuick(q.data(), 3, nullptr);
  EXPECT_NEAR(q[0], 1.0 / (1.0 + std::exp(-1.702)), 1e-3);
  EXPECT_NEAR(q[1], -2.0 / (1.0 + std::exp(3.404)), 1e-3);
  EXPECT_EQ(q[2], 20.0f);  // f16(20) is exact and sigmoid(34) rounds to 1
}

}  // namespace
}  // namespace mx::vision
