// Element-wise kernels whose result is the same on every path (exact or
// libm-based f32 arithmetic per element): Rope, Add, ReluSquared, SwiGluClamped,
// GeGluF16Table.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/fp16.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

constexpr float kPi = 3.14159265358979323846f;  // (float)M_PI, as ggml uses it

// ggml_rope_yarn_corr_dim: the dimension whose wavelength spans n_rot_beta
// turns over the original context.
float YarnCorrDim(int n_dims, int n_ctx_orig, float n_rot_beta, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot_beta * 2.0f * kPi)) /
         (2.0f * std::log(base));
}

// cos/sin of pair i's angle (llama.cpp rope_yarn; ENGINE-FACTS §5).
void RopeAngle(float theta_extrap, const RopeParams& p, const float corr[2], int i, float* c,
               float* s) {
  const float theta_interp = p.freq_scale * theta_extrap;
  float theta = theta_interp;
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    const float y = (static_cast<float>(i) - corr[0]) / std::fmax(0.001f, corr[1] - corr[0]);
    const float ramp = 1.0f - std::fmin(1.0f, std::fmax(0.0f, y));
    const float ramp_mix = ramp * p.ext_factor;
    theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  }
  if (p.rotation_only) mscale = 1.0f;
  *c = std::cos(theta) * mscale;
  *s = std::sin(theta) * mscale;
}

// The rotation of every head by the cos/sin pairs `cs` ([n_rot / 2][2]).
void Rotate(float* x, int n_heads, int head_dim, const RopeParams& p, const float* cs) {
  const int half = p.n_rot / 2;
  // Pair i of each head: (2i, 2i+1) in normal mode, (i, i + n_rot/2) in NeoX.
  const int stride = p.mode == RopeMode::kNeox ? 1 : 2;
  const int offset = p.mode == RopeMode::kNeox ? half : 1;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = v[stride * i], x1 = v[stride * i + offset];
      v[stride * i] = x0 * c - x1 * s;
      v[stride * i + offset] = x0 * s + x1 * c;
    }
  }
}

// The angles of one row: `pick(i)` says which of the four position
// components pair i rotates by (0 t, 1 h, 2 w, 3 e); each component's angle
// is built iteratively in f32, as llama.cpp does, then fed to rope_yarn.
template <typename Pick>
void RopeRow(float* x, int n_heads, int head_dim, const RopeParams& p, const int64_t pos[4],
             Pick pick) {
  const int n_rot = p.n_rot;
  if (n_rot <= 0 || n_rot > head_dim) return;
  const int half = n_rot / 2;
  float corr[2] = {0.0f, 0.0f};
  if (p.ext_factor != 0.0f) {
    corr[0] =
        std::fmax(0.0f, std::floor(YarnCorrDim(n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    corr[1] = std::fmin(static_cast<float>(n_rot - 1),
                        std::ceil(YarnCorrDim(n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  constexpr int kStackPairs = 256;
  float stack_cs[2 * kStackPairs];
  std::vector<float> heap_cs;
  float* cs = stack_cs;
  if (half > kStackPairs) {
    heap_cs.resize(2 * static_cast<size_t>(half));
    cs = heap_cs.data();
  }
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(n_rot));
  float theta[4];
  for (int k = 0; k < 4; ++k) theta[k] = static_cast<float>(pos[k]);
  for (int i = 0; i < half; ++i) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0f;
    RopeAngle(theta[pick(i)] / ff, p, corr, i, &cs[2 * i], &cs[2 * i + 1]);
    for (float& t : theta) t *= theta_scale;
  }
  Rotate(x, n_heads, head_dim, p, cs);
}

}  // namespace

void Rope(float* x, int n_heads, int head_dim, const RopeParams& p, int64_t pos) {
  const int64_t all[4] = {pos, pos, pos, pos};
  RopeRow(x, n_heads, head_dim, p, all, [](int) { return 0; });
}

void RopeMulti(float* x, int n_heads, int head_dim, const RopeParams& p, const int sections[4],
               const RopePos& pos) {
  const int64_t comp[4] = {pos.t, pos.h, pos.w, pos.e};
  const int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
  if (sect_dims <= 0) return Rope(x, n_heads, head_dim, p, pos.t);
  RopeRow(x, n_heads, head_dim, p, comp, [&](int i) {
    const int s = i % sect_dims;
    if (s % 3 == 1 && s < 3 * sections[1]) return 1;
    if (s % 3 == 2 && s < 3 * sections[2]) return 2;
    if (s % 3 == 0 && s < 3 * sections[0]) return 0;
    return 3;
  });
}

void Add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void ReluSquared(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] > 0.0f ? x[i] : 0.0f;
    x[i] = v * v;
  }
}

void SwiGluClamped(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    out[i] = g / (1.0f + std::exp(kAlpha * -g)) * (u + 1.0f);
  }
}

namespace {

// ggml_table_gelu_f16: for every f16 value h, f16(gelu_f32(h)) with ggml's
// gelu_f32 (f32 arithmetic, libm tanhf).
const std::array<uint16_t, 65536>& GeluF16Table() {
  static const std::array<uint16_t, 65536> table = [] {
    std::array<uint16_t, 65536> t{};
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoefA = 0.044715f;
    for (uint32_t i = 0; i < t.size(); ++i) {
      const float x = Fp16ToF32(static_cast<uint16_t>(i));
      const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
      t[i] = F32ToFp16(g);
    }
    return t;
  }();
  return table;
}

}  // namespace

void GeGluF16Table(const float* gate, const float* up, int64_t n, float* out) {
  const std::array<uint16_t, 65536>& table = GeluF16Table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      g = Fp16ToF32(table[F32ToFp16(x)]);
    }
    out[i] = g * up[i];
  }
}

}  // namespace mx::kernels
