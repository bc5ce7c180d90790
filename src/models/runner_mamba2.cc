// The Mamba2 mixer of nemotron_h (ENGINE-FACTS §6, ref/README "Architectures"):
//   zxBCdt = W_in · h                 split as z [d_inner] | xBC [C] | dt [H]
//   xBC    = silu(causal_conv(xBC) + conv_bias)
//   dt     = softplus(dt + dt_bias); dA = exp(dt * A[h])
//   S[h]   = dA * S[h] + outer(x[h] * dt, B[g])     (per head h, group g = h / (H/G))
//   y[h]   = S[h] · C[g] + D[h] * x[h]
//   y      = group_rms(y * silu(z)) * ssm_norm;     out = W_out · y
// Tokens of one sequence are processed in order; the per-token arithmetic is
// the same whether a token arrives alone or inside a long prompt.
#include <cmath>
#include <cstring>

#include "models/runner.h"

namespace mx::models {
namespace {

inline float Softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }
inline float SiluScalar(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace

void Runner::Mamba2Mixer(size_t layer, size_t rec_index, int64_t n) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layer(static_cast<int64_t>(layer));
  const int64_t e = c.n_embd;
  const int64_t d_inner = c.ssm_d_inner, n_ch = c.ssm_conv_channels();
  const int64_t d_conv = c.ssm_d_conv, d_state = c.ssm_d_state;
  const int64_t n_head = c.ssm_n_head, n_group = c.ssm_n_group;
  const int64_t head_dim = d_inner / n_head, heads_per_group = n_head / n_group;
  const int64_t group_size = d_inner / n_group;
  const int64_t in_dim = d_inner + n_ch + n_head;

  ff1_.resize(static_cast<size_t>(n * in_dim));
  kernels::MatMul(w.ssm_in, h_.data(), e, n, ff1_.data(), in_dim, &pool_);
  ff2_.resize(static_cast<size_t>(n * d_inner));  // y per token

  std::vector<float> conv_out(static_cast<size_t>(n_ch));
  for (int64_t i = 0; i < n; ++i) {
    SequenceState* seq = plan_[static_cast<size_t>(i)].seq;
    float* conv_state = seq->conv_state(rec_index);  // [d_conv - 1][n_ch], oldest first
    float* ssm = seq->ssm_state(rec_index);          // [n_head][head_dim][d_state]
    const float* z = &ff1_[i * in_dim];
    const float* xbc = z + d_inner;
    const float* dt_raw = xbc + n_ch;

    // Causal depthwise convolution over [state | this token], then SiLU.
    for (int64_t ch = 0; ch < n_ch; ++ch) {
      const float* wc = &w.ssm_conv_w[static_cast<size_t>(ch * d_conv)];
      float sum = 0.0f;
      for (int64_t k = 0; k < d_conv - 1; ++k) sum += wc[k] * conv_state[k * n_ch + ch];
      sum += wc[d_conv - 1] * xbc[ch];
      conv_out[static_cast<size_t>(ch)] = SiluScalar(sum + w.ssm_conv_b[static_cast<size_t>(ch)]);
    }
    if (d_conv > 1) {
      std::memmove(conv_state, conv_state + n_ch, static_cast<size_t>((d_conv - 2) * n_ch) * sizeof(float));
      std::memcpy(conv_state + (d_conv - 2) * n_ch, xbc, static_cast<size_t>(n_ch) * sizeof(float));
    }
    const float* xs = conv_out.data();
    const float* bs = xs + d_inner;
    const float* cs = bs + n_group * d_state;

    float* y = &ff2_[i * d_inner];
    for (int64_t h = 0; h < n_head; ++h) {
      const float dt = Softplus(dt_raw[h] + w.ssm_dt_bias[static_cast<size_t>(h)]);
      const float da = std::exp(dt * w.ssm_a[static_cast<size_t>(h)]);
      const int64_t g = h / heads_per_group;
      const float* b = bs + g * d_state;
      const float* cc = cs + g * d_state;
      for (int64_t p = 0; p < head_dim; ++p) {
        const float xv = xs[h * head_dim + p];
        const float x_dt = xv * dt;
        float* s = ssm + (h * head_dim + p) * d_state;
        float acc = 0.0f;
        for (int64_t k = 0; k < d_state; ++k) {
          s[k] = s[k] * da + b[k] * x_dt;
          acc += s[k] * cc[k];
        }
        y[h * head_dim + p] = acc + xv * w.ssm_d[static_cast<size_t>(h)];
      }
    }
    // Gate with silu(z), then RMS-normalise each group.
    for (int64_t j = 0; j < d_inner; ++j) y[j] *= SiluScalar(z[j]);
    for (int64_t g = 0; g < n_group; ++g) {
      kernels::RmsNorm(y + g * group_size, &w.ssm_norm[static_cast<size_t>(g * group_size)],
                       group_size, c.rms_eps, y + g * group_size);
    }
    // A snapshot asked for after this token: save this layer's part of it.
    if (float* snap = seq->PendingSnapshot(plan_[static_cast<size_t>(i)].pos + 1, rec_index)) {
      const RecurrentLayerLayout& rl = layout_->recurrent[rec_index];
      const size_t floats = static_cast<size_t>(rl.conv_floats + rl.state_floats);
      std::memcpy(snap, conv_state, floats * sizeof(float));
    }
  }
  kernels::MatMul(w.ssm_out, ff2_.data(), d_inner, n, out_.data(), e, &pool_);
}

}  // namespace mx::models
