// The Gated DeltaNet mixer of qwen35 (arch_qwen35.cc has the maths). Per
// batch, in four passes:
//   1. projections: mix = Wqkv h, z = Wgate h, alpha = Walpha h, beta = Wbeta h;
//   2. per channel: the causal conv over [window | the sequence's tokens], SiLU
//      (parallel over channel blocks, each sequence's tokens in order);
//      per token: l2-normalise q and k, scale q, decay = exp(g), beta = sigmoid;
//   3. per (sequence, value head): the delta rule over the sequence's tokens
//      in order (kernels::DeltaRule), a sequential f32 recurrence — the same
//      arithmetic for a token whether it comes alone or inside a long prompt,
//      so chunked prompts and generation give the same bits;
//   4. per token: y = rms(o, ssm_norm) * silu(z) per head; out = Wout y.
// Snapshots asked for after a token copy the conv window in pass 2 and each
// head's state in pass 3.
#include <cmath>
#include <cstring>

#include "models/runner.h"

namespace mx::models {
namespace {

inline float Softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }
inline float SiluScalar(float v) { return v / (1.0f + std::exp(-v)); }
inline float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// x /= max(||x||_2, eps), summed in a fixed order.
void L2Normalize(float* x, int64_t n, float eps, float scale) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float inv = scale / std::fmax(std::sqrt(sum), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

constexpr int64_t kConvChannelsPerTask = 256;

}  // namespace

void Runner::DeltaNetMixer(size_t layer, size_t rec_index, int64_t n) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layer(static_cast<int64_t>(layer));
  const RecurrentLayerLayout& rl = layout_->recurrent[rec_index];
  const int64_t e = c.n_embd;
  const int64_t n_ch = c.ssm_conv_channels(), d_conv = c.ssm_d_conv;
  const int64_t nk = c.ssm_n_group, nv = c.ssm_n_head;
  const int64_t dk = c.ssm_d_state, dv = c.ssm_d_inner / nv, d_inner = c.ssm_d_inner;
  const int64_t q_at = 0, k_at = nk * dk, v_at = 2 * nk * dk;  // channel offsets

  // 1. Projections. mix_ holds [alpha: n x nv | beta: n x nv].
  ff1_.resize(static_cast<size_t>(n * n_ch));
  gate_.resize(static_cast<size_t>(n * d_inner));
  mix_.resize(static_cast<size_t>(2 * n * nv));
  float* alpha = mix_.data();
  float* beta = mix_.data() + n * nv;
  const kernels::MatMulJob proj[] = {{w.ssm_qkv, h_.data(), e, n, ff1_.data(), n_ch},
                                     {w.ssm_gate, h_.data(), e, n, gate_.data(), d_inner},
                                     {w.ssm_alpha, h_.data(), e, n, alpha, nv},
                                     {w.ssm_beta, h_.data(), e, n, beta, nv}};
  kernels::MatMuls(proj, &pool_);

  // 2a. Causal depthwise conv + SiLU into ff2_, per block of channels; each
  // sequence's entries in order, its window sliding along.
  ff2_.resize(static_cast<size_t>(n * n_ch));
  const int64_t n_blocks = (n_ch + kConvChannelsPerTask - 1) / kConvChannelsPerTask;
  pool_.ParallelFor(n_blocks, [&](int64_t block, int) {
    const int64_t ch0 = block * kConvChannelsPerTask;
    const int64_t ch1 = std::min(n_ch, ch0 + kConvChannelsPerTask);
    for (const std::vector<int64_t>& entries : seq_entries_) {
      SequenceState* seq = plan_[static_cast<size_t>(entries[0])].seq;
      float* window = seq->conv_state(rec_index);  // [d_conv - 1][n_ch], oldest first
      const size_t len = static_cast<size_t>(ch1 - ch0);
      for (int64_t i : entries) {
        const float* in = &ff1_[static_cast<size_t>(i * n_ch)];
        float* conv = &ff2_[static_cast<size_t>(i * n_ch)];
        // sum over taps of tap[k] * [window | in][k], oldest first, then the
        // bias; along channels, so every loop runs over contiguous floats.
        for (int64_t ch = ch0; ch < ch1; ++ch) conv[ch] = 0.0f;
        for (int64_t k = 0; k < d_conv; ++k) {
          const float* tap = &w.ssm_conv_taps[static_cast<size_t>(k * n_ch)];
          const float* x = k < d_conv - 1 ? window + k * n_ch : in;
          for (int64_t ch = ch0; ch < ch1; ++ch) conv[ch] += tap[ch] * x[ch];
        }
        for (int64_t ch = ch0; ch < ch1; ++ch) conv[ch] += w.ssm_conv_b[static_cast<size_t>(ch)];
        kernels::Silu(conv + ch0, static_cast<int64_t>(len));
        for (int64_t k = 0; k + 1 < d_conv - 1; ++k) {
          std::memcpy(window + k * n_ch + ch0, window + (k + 1) * n_ch + ch0, len * sizeof(float));
        }
        if (d_conv > 1)
          std::memcpy(window + (d_conv - 2) * n_ch + ch0, in + ch0, len * sizeof(float));
        const int64_t after = plan_[static_cast<size_t>(i)].pos + 1;
        if (float* snap = seq->PendingSnapshot(after, rec_index)) {
          for (int64_t k = 0; k < d_conv - 1; ++k) {
            std::memcpy(snap + k * n_ch + ch0, window + k * n_ch + ch0,
                        static_cast<size_t>(ch1 - ch0) * sizeof(float));
          }
        }
      }
    }
  });

  // 2b. Per token: normalised q (scaled by 1/sqrt(dk)) and k, decay, beta.
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  pool_.ParallelFor(n, [&](int64_t i, int) {
    float* conv = &ff2_[static_cast<size_t>(i * n_ch)];
    for (int64_t h = 0; h < nk; ++h) {
      L2Normalize(conv + q_at + h * dk, dk, c.rms_eps, q_scale);
      L2Normalize(conv + k_at + h * dk, dk, c.rms_eps, 1.0f);
    }
    for (int64_t h = 0; h < nv; ++h) {
      float& a = alpha[i * nv + h];
      const float g =
          w.ssm_a[static_cast<size_t>(h)] * Softplus(a + w.ssm_dt_bias[static_cast<size_t>(h)]);
      a = std::exp(g);  // the decay
      beta[i * nv + h] = Sigmoid(beta[i * nv + h]);
    }
  });

  // 3. The delta rule, per (sequence, value head); value head h reads key
  // head h mod nk. o goes to att_ [n, d_inner].
  att_.resize(static_cast<size_t>(n * d_inner));
  for (auto& s : att_scratch_) {
    if (s.size() < static_cast<size_t>(dv)) s.resize(static_cast<size_t>(dv));
  }
  const auto n_seqs = static_cast<int64_t>(seq_entries_.size());
  pool_.ParallelFor(n_seqs * nv, [&](int64_t task, int thread) {
    const std::vector<int64_t>& entries = seq_entries_[static_cast<size_t>(task / nv)];
    const int64_t h = task % nv, kh = h % nk;
    SequenceState* seq = plan_[static_cast<size_t>(entries[0])].seq;
    float* state = seq->ssm_state(rec_index) + h * dk * dv;
    float* delta = att_scratch_[static_cast<size_t>(thread)].data();
    for (int64_t i : entries) {
      const float* conv = &ff2_[static_cast<size_t>(i * n_ch)];
      kernels::DeltaRule(state, conv + k_at + kh * dk, conv + v_at + h * dv, conv + q_at + kh * dk,
                         alpha[i * nv + h], beta[i * nv + h], dk, dv, delta,
                         &att_[static_cast<size_t>(i * d_inner + h * dv)]);
      const int64_t after = plan_[static_cast<size_t>(i)].pos + 1;
      if (float* snap = seq->PendingSnapshot(after, rec_index)) {
        std::memcpy(snap + rl.conv_floats + h * dk * dv, state,
                    static_cast<size_t>(dk * dv) * sizeof(float));
      }
    }
  });

  // 4. Gated RMS norm per head, then the output projection.
  pool_.ParallelFor(n, [&](int64_t i, int) {
    float* y = &att_[static_cast<size_t>(i * d_inner)];
    const float* z = &gate_[static_cast<size_t>(i * d_inner)];
    for (int64_t h = 0; h < nv; ++h) {
      kernels::RmsNorm(y + h * dv, w.ssm_norm.data(), dv, c.rms_eps, y + h * dv);
    }
    for (int64_t j = 0; j < d_inner; ++j) y[j] *= SiluScalar(z[j]);
  });
  kernels::MatMul(w.ssm_out, att_.data(), d_inner, n, out_.data(), e, &pool_);
}

}  // namespace mx::models
