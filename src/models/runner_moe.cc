// The mixture-of-experts FFN block (ModelConfig::moe, moe_router.h).
//
// Each token's experts are chosen from its own router logits; then every
// chosen expert runs once over the tokens that chose it (their input rows
// gathered into one matrix: a product per expert, not per token), and each
// token sums its experts' outputs, weighted, in its own choice order. Only
// the chosen experts' rows are read; for one token that is k of n_expert.
// A token's output depends on its input alone: the routing is per token and
// every product's rows are batch-invariant (kernels.h MatMul), so which other
// tokens share its batch or its experts changes nothing.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/moe_router.h"
#include "models/runner.h"

namespace mx::models {
namespace {

// y[t, j] += bias[e * n + j] for the rows of expert e.
void AddBias(const std::vector<float>& bias, int64_t e, int64_t n, float* y, int64_t n_rows) {
  const float* b = &bias[static_cast<size_t>(e * n)];
  for (int64_t r = 0; r < n_rows; ++r) kernels::Add(b, n, y + r * n);
}

// The expert's activation on [gate | up] products (up alone for ReLU^2),
// written over g.
void Activate(Ffn kind, float* g, const float* u, int64_t n) {
  switch (kind) {
    case Ffn::kSwiGlu: kernels::SwiGlu(g, u, n, g); break;
    case Ffn::kSwiGluClamped: kernels::SwiGluClamped(g, u, n, g); break;
    case Ffn::kReluSquared: kernels::ReluSquared(g, n); break;
    default: break;
  }
}

// Runs the queued products in groups of kMaxMatMulJobs (one parallel region each).
void RunJobs(std::vector<kernels::MatMulJob>& jobs, ThreadPool* pool) {
  kernels::MatMuls(jobs, pool);
  jobs.clear();
}

}  // namespace

void Runner::MoeBlock(size_t layer, int64_t n) {
  const ModelConfig& c = model_.config();
  const MoeConfig& m = c.moe;
  const MoeWeights& w = model_.layer(static_cast<int64_t>(layer)).moe;
  const int64_t e = c.n_embd, ne = m.n_expert, k = m.n_expert_used, ff = m.n_ff_expert;
  const bool gated = m.expert_ffn != Ffn::kReluSquared;

  // Route every token.
  moe_logits_.resize(static_cast<size_t>(n * ne));
  kernels::MatMul(w.router, h_.data(), e, n, moe_logits_.data(), ne, &pool_);
  moe_experts_.resize(static_cast<size_t>(n * k));
  moe_weights_.resize(static_cast<size_t>(n * k));
  for (int64_t t = 0; t < n; ++t) {
    float* l = &moe_logits_[static_cast<size_t>(t * ne)];
    if (!w.router_bias.empty()) kernels::Add(w.router_bias.data(), ne, l);
    float gap = 0;
    router_->Route(l, w.selection_bias.empty() ? nullptr : w.selection_bias.data(),
                   &moe_experts_[static_cast<size_t>(t * k)],
                   &moe_weights_[static_cast<size_t>(t * k)], &gap);
    if (routing_log_ != nullptr) {
      RoutingDecision d{static_cast<int64_t>(layer), t, {}, {}, gap};
      d.experts.assign(&moe_experts_[static_cast<size_t>(t * k)],
                       &moe_experts_[static_cast<size_t>((t + 1) * k)]);
      d.weights.assign(&moe_weights_[static_cast<size_t>(t * k)],
                       &moe_weights_[static_cast<size_t>((t + 1) * k)]);
      routing_log_->push_back(std::move(d));
    }
  }

  // Slots (token t, choice j) grouped by expert, tokens in batch order.
  moe_first_.assign(static_cast<size_t>(ne + 1), 0);
  for (int32_t x : moe_experts_) ++moe_first_[static_cast<size_t>(x) + 1];
  for (int64_t x = 0; x < ne; ++x) moe_first_[x + 1] += moe_first_[x];
  moe_slots_.resize(static_cast<size_t>(n * k));
  {
    std::vector<int64_t>& next = moe_next_;
    next.assign(moe_first_.begin(), moe_first_.end() - 1);
    for (int64_t s = 0; s < n * k; ++s) moe_slots_[next[moe_experts_[s]]++] = s;
  }

  // Each expert's input rows: the normed rows of its tokens (one token reads
  // h_ in place, so its experts share one quantized input).
  const float* x_all = h_.data();
  if (n > 1) {
    moe_x_.resize(static_cast<size_t>(n * k * e));
    for (int64_t r = 0; r < n * k; ++r) {
      std::memcpy(&moe_x_[r * e], &h_[(moe_slots_[r] / k) * e], static_cast<size_t>(e) * 4);
    }
    x_all = moe_x_.data();
  }
  auto x_of = [&](int64_t first) { return n > 1 ? x_all + first * e : x_all; };

  // gate / up, the activation, down: every chosen expert over its rows.
  ff1_.resize(static_cast<size_t>(n * k * ff));
  if (gated) ff2_.resize(ff1_.size());
  moe_y_.resize(static_cast<size_t>(n * k * e));
  std::vector<kernels::MatMulJob>& jobs = moe_jobs_;
  for (int64_t x = 0; x < ne; ++x) {
    const int64_t first = moe_first_[x], rows = moe_first_[x + 1] - first;
    if (rows == 0) continue;
    if (gated) jobs.push_back({w.gate.Of(x), x_of(first), e, rows, &ff1_[first * ff], ff});
    jobs.push_back({w.up.Of(x), x_of(first), e, rows, &(gated ? ff2_ : ff1_)[first * ff], ff});
  }
  RunJobs(jobs, &pool_);
  for (int64_t x = 0; x < ne; ++x) {
    const int64_t first = moe_first_[x], rows = moe_first_[x + 1] - first;
    if (rows == 0) continue;
    if (!w.gate_bias.empty()) {
      AddBias(w.gate_bias, x, ff, &ff1_[first * ff], rows);
      AddBias(w.up_bias, x, ff, &ff2_[first * ff], rows);
    }
    Activate(m.expert_ffn, &ff1_[first * ff], gated ? &ff2_[first * ff] : nullptr, rows * ff);
    jobs.push_back({w.down.Of(x), &ff1_[first * ff], ff, rows, &moe_y_[first * e], e});
  }
  RunJobs(jobs, &pool_);
  if (!w.down_bias.empty()) {
    for (int64_t x = 0; x < ne; ++x) {
      const int64_t first = moe_first_[x], rows = moe_first_[x + 1] - first;
      if (rows > 0) AddBias(w.down_bias, x, e, &moe_y_[first * e], rows);
    }
  }

  // The shared expert (into out_), then each token's weighted sum in choice
  // order: moe = ((w_1 y_1 + w_2 y_2) + w_3 y_3) + ...; ffn = moe + shared.
  const bool shared = m.n_ff_shared > 0;
  if (shared) SharedExpert(layer, n);
  moe_row_.resize(static_cast<size_t>(n * k));
  moe_acc_.resize(static_cast<size_t>(e));
  for (int64_t r = 0; r < n * k; ++r) moe_row_[moe_slots_[r]] = r;
  for (int64_t t = 0; t < n; ++t) {
    float* o = &out_[t * e];
    const float* wt = &moe_weights_[t * k];
    const float* y0 = &moe_y_[moe_row_[t * k] * e];
    for (int64_t i = 0; i < e; ++i) moe_acc_[i] = wt[0] * y0[i];
    for (int64_t j = 1; j < k; ++j) {
      const float* y = &moe_y_[moe_row_[t * k + j] * e];
      const float wj = wt[j];
      for (int64_t i = 0; i < e; ++i) moe_acc_[i] = moe_acc_[i] + wj * y[i];
    }
    if (shared) {
      for (int64_t i = 0; i < e; ++i) o[i] = moe_acc_[i] + o[i];
    } else {
      std::memcpy(o, moe_acc_.data(), static_cast<size_t>(e) * 4);
    }
  }
}

void Runner::SharedExpert(size_t layer, int64_t n) {
  const ModelConfig& c = model_.config();
  const MoeWeights& w = model_.layer(static_cast<int64_t>(layer)).moe;
  const int64_t e = c.n_embd, fs = c.moe.n_ff_shared;
  const bool gated = c.moe.expert_ffn != Ffn::kReluSquared;
  moe_sh1_.resize(static_cast<size_t>(n * fs));
  if (gated) moe_sh2_.resize(moe_sh1_.size());
  std::vector<kernels::MatMulJob>& jobs = moe_jobs_;
  if (gated) jobs.push_back({w.shared_gate, h_.data(), e, n, moe_sh1_.data(), fs});
  jobs.push_back({w.shared_up, h_.data(), e, n, (gated ? moe_sh2_ : moe_sh1_).data(), fs});
  moe_gate_.resize(static_cast<size_t>(n));
  if (!w.shared_gate_inp.empty()) {
    const Matrix g{DType::kF32, reinterpret_cast<const uint8_t*>(w.shared_gate_inp.data()), e, 1,
                   static_cast<size_t>(e) * 4};
    jobs.push_back({g, h_.data(), e, n, moe_gate_.data(), 1});
  }
  RunJobs(jobs, &pool_);
  Activate(c.moe.expert_ffn, moe_sh1_.data(), gated ? moe_sh2_.data() : nullptr, n * fs);
  kernels::MatMul(w.shared_down, moe_sh1_.data(), fs, n, out_.data(), e, &pool_);
  if (!w.shared_gate_inp.empty()) {
    for (int64_t t = 0; t < n; ++t) {
      const float s = 1.0f / (1.0f + std::exp(-moe_gate_[t]));
      for (int64_t i = 0; i < e; ++i) out_[t * e + i] *= s;
    }
  }
}

}  // namespace mx::models
