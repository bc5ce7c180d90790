#include "models/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mx::models {
namespace {

// ggml's softmax: exp(x - max) in f32, the sum in double, then every value
// times (float)(1 / sum).
void Softmax(const float* x, int64_t n, float* out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - max);
    sum += out[i];
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) out[i] *= inv;
}

// The first m of the ids [0, n) by descending score, equal scores by id (a
// strict total order: the result does not depend on the algorithm). NaN
// scores were made -inf before.
void TopIds(const float* score, int64_t n, int64_t m, std::vector<int32_t>& ids) {
  ids.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + std::min(m, n), ids.end(),
                    [score](int32_t a, int32_t b) {
                      return score[a] > score[b] || (score[a] == score[b] && a < b);
                    });
}

}  // namespace

void MoeRouter::Route(const float* logits, const float* selection_bias, int32_t* experts,
                      float* weights, float* gap) {
  const int64_t n = m_.n_expert, k = m_.n_expert_used;
  p_.resize(static_cast<size_t>(n));
  s_.resize(static_cast<size_t>(n));
  switch (m_.gating) {
    case MoeGating::kSoftmax: Softmax(logits, n, p_.data()); break;
    case MoeGating::kSigmoid:
      for (int64_t i = 0; i < n; ++i) p_[i] = 1.0f / (1.0f + std::exp(-logits[i]));
      break;
    case MoeGating::kSoftmaxOfTopK: std::copy(logits, logits + n, p_.begin()); break;
  }
  for (int64_t i = 0; i < n; ++i) {
    s_[i] = p_[i] + (selection_bias != nullptr ? selection_bias[i] : 0.0f);
    if (std::isnan(s_[i])) s_[i] = -std::numeric_limits<float>::infinity();
  }

  // Group limit: a group scores the sum of its two best; the experts of all
  // but the n_group_used best groups leave the race.
  if (m_.n_group > 1) {
    const int64_t per = n / m_.n_group;
    group_score_.resize(static_cast<size_t>(m_.n_group));
    for (int64_t g = 0; g < m_.n_group; ++g) {
      TopIds(&s_[g * per], per, 2, order_);
      group_score_[g] = s_[g * per + order_[0]] + s_[g * per + order_[1]];
    }
    TopIds(group_score_.data(), m_.n_group, m_.n_group_used, groups_);
    for (int64_t r = m_.n_group_used; r < m_.n_group; ++r) {
      std::fill_n(&s_[groups_[r] * per], per, -std::numeric_limits<float>::infinity());
    }
  }

  TopIds(s_.data(), n, k + 1, order_);
  for (int64_t j = 0; j < k; ++j) experts[j] = order_[j];
  if (gap != nullptr) *gap = k < n ? s_[order_[k - 1]] - s_[order_[k]] : 0.0f;

  if (m_.gating == MoeGating::kSoftmaxOfTopK) {
    for (int64_t j = 0; j < k; ++j) s_[j] = logits[experts[j]];  // s_ is free now
    Softmax(s_.data(), k, weights);
  } else {
    for (int64_t j = 0; j < k; ++j) weights[j] = p_[experts[j]];
  }
  if (m_.normalize) {
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += weights[j];
    const float denom = std::max(static_cast<float>(sum), 6.103515625e-5f);
    for (int64_t j = 0; j < k; ++j) weights[j] /= denom;
  }
  if (m_.scale != 0.0f && m_.scale != 1.0f) {
    for (int64_t j = 0; j < k; ++j) weights[j] *= m_.scale;
  }
}

}  // namespace mx::models
