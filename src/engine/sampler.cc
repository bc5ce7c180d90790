#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "kernels/kernels.h"

namespace mx::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float Clean(float x) { return std::isnan(x) ? kNegInf : x; }

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status OutOfRange(const char* field, const char* range, double value) {
  return Status::InvalidArgument(std::string("sampling parameter ") + field + " must be in " +
                                 range + ", got " + Fmt(value));
}

// Index of the largest value, ties to the lowest index; 0 when all are -inf.
// REQUIRES: no NaN in v (callers pass work_, which has NaN replaced).
size_t ArgMax(std::span<const float> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p) {
  // Written as !(in range) so that NaN fails every check.
  if (!(p.temperature >= 0.0f && p.temperature <= 2.0f)) {
    return OutOfRange("temperature", "[0, 2]", p.temperature);
  }
  if (p.top_k < 0) return OutOfRange("top_k", "[0, inf) (0 = off)", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return OutOfRange("top_p", "(0, 1]", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p < 1.0f)) return OutOfRange("min_p", "[0, 1)", p.min_p);
  if (!(p.repeat_penalty > 0.0f && std::isfinite(p.repeat_penalty))) {
    return OutOfRange("repeat_penalty", "(0, inf)", p.repeat_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return OutOfRange("frequency_penalty", "[-2, 2]", p.frequency_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return OutOfRange("presence_penalty", "[-2, 2]", p.presence_penalty);
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return OutOfRange("logit_bias", "[-inf, 100]", bias);
    }
  }
  if (p.repeat_last_n < -1) {
    return OutOfRange("repeat_last_n", "[-1, inf) (-1 = whole history, 0 = off)", p.repeat_last_n);
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params), seed_(params.seed) {
  if (seed_ == 0) {
    std::random_device rd;
    seed_ = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  }
  rng_.seed(seed_);
}

double Sampler::Uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::PreparePenalizedLogits(std::span<const float> logits,
                                     std::span<const int32_t> history) {
  const size_t n_vocab = logits.size();
  work_.resize(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) work_[i] = Clean(logits[i]);
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id >= 0 && static_cast<size_t>(id) < n_vocab) work_[id] += bias;
  }

  const float penalty = params_.repeat_penalty;
  const float freq = params_.frequency_penalty, presence = params_.presence_penalty;
  if ((penalty == 1.0f && freq == 0.0f && presence == 0.0f) || params_.repeat_last_n == 0 ||
      history.empty()) {
    return;
  }
  const size_t window = params_.repeat_last_n < 0
                            ? history.size()
                            : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
  const std::span<const int32_t> recent = history.last(window);
  seen_.resize(n_vocab, 0);
  for (int32_t id : recent) {
    if (id >= 0 && static_cast<size_t>(id) < n_vocab) ++seen_[id];
  }
  // llama.cpp: each distinct recent token once; positive logits are divided by
  // the repetition penalty, the others multiplied (both push it down when
  // penalty > 1); then OpenAI's frequency and presence penalties.
  for (int32_t id : recent) {
    if (id < 0 || static_cast<size_t>(id) >= n_vocab || seen_[id] == 0) continue;
    float& l = work_[id];
    if (penalty != 1.0f) l = l <= 0.0f ? l * penalty : l / penalty;
    l -= static_cast<float>(seen_[id]) * freq + presence;
    seen_[id] = 0;  // done with this id (and back to all 0 for the next call)
  }
}

bool Sampler::Better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void Sampler::SelectTopK(std::span<const float> values, size_t k, std::vector<Candidate>& out) {
  // Bounded heap of the k best; with comp = Better the front is the worst kept.
  k = std::min(k, values.size());
  out.clear();
  if (k == 0) return;
  out.reserve(k);
  for (size_t i = 0; i < k; ++i) out.push_back({static_cast<int32_t>(i), Clean(values[i])});
  std::make_heap(out.begin(), out.end(), Better);
  for (size_t i = k; i < values.size(); ++i) {
    // Ids grow, so an equal logit is never better than a kept one: strict >.
    const float l = Clean(values[i]);
    if (l > out.front().logit) {
      std::pop_heap(out.begin(), out.end(), Better);
      out.back() = {static_cast<int32_t>(i), l};
      std::push_heap(out.begin(), out.end(), Better);
    }
  }
  std::sort_heap(out.begin(), out.end(), Better);  // best first
}

void Sampler::TopPUnsorted(float max_logit, double target) {
  // Bucket the candidates by logit (bin 0 holds the best), add up each bin's
  // weight, find the bin where the running weight reaches `target`, and sort
  // only that bin. Equal logits share a bin, and the bin index never decreases
  // as the logit falls, so this is the exact best-first walk.
  constexpr int kBins = 4096;
  constexpr float kRange = 32.0f;  // logits below max - 32 carry < 1.3e-14 of the weight each
  constexpr float kScale = kBins / kRange;
  const auto bin_of = [&](float logit) {
    const float d = (max_logit - logit) * kScale;  // >= 0; +inf for a -inf logit
    return d >= static_cast<float>(kBins - 1) ? kBins - 1 : static_cast<int>(d);
  };
  bin_weight_.assign(kBins, 0.0);
  for (const Candidate& c : cands_) bin_weight_[bin_of(c.logit)] += c.weight;
  double acc = 0.0;
  int bin = 0;
  while (bin < kBins && acc + bin_weight_[bin] < target) acc += bin_weight_[bin++];
  if (bin == kBins) return;  // rounding kept the total just below target: keep all

  select_.clear();
  for (const Candidate& c : cands_) {
    if (bin_of(c.logit) == bin) select_.push_back(c);
  }
  if (select_.empty()) return;  // cannot happen: the bin has positive weight
  std::sort(select_.begin(), select_.end(), Better);
  Candidate last = select_.back();  // if rounding never reaches target: the whole bin
  for (const Candidate& c : select_) {
    acc += c.weight;
    if (acc >= target) {
      last = c;
      break;
    }
  }
  std::erase_if(cands_, [&](const Candidate& c) { return Better(last, c); });
}

bool Sampler::Truncate() {
  const size_t n_vocab = work_.size();

  // top-k: a partial selection, never a sort of the whole vocabulary.
  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n_vocab) {
    SelectTopK(work_, static_cast<size_t>(params_.top_k), cands_);
    sorted = true;
  } else {
    cands_.resize(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) cands_[i] = {static_cast<int32_t>(i), work_[i]};
  }
  float max = kNegInf;
  if (sorted) {
    max = cands_.front().logit;
  } else {
    for (const Candidate& c : cands_) max = std::max(max, c.logit);
  }
  if (!std::isfinite(max)) return false;
  // min-p keeps logit >= max + log(min_p), i.e. p >= min_p * p_max.
  const float min_p_logit = params_.min_p > 0.0f ? max + std::log(params_.min_p) : kNegInf;

  // top-p: the shortest best-first prefix whose probability (softmax over the
  // top-k survivors, temperature 1) reaches top_p.
  if (params_.top_p < 1.0f) {
    double z = 0.0;
    for (Candidate& c : cands_) {
      c.weight = std::exp(c.logit - max);
      z += c.weight;
    }
    const double target = static_cast<double>(params_.top_p) * z;
    if (sorted) {
      double cum = 0.0;
      for (size_t i = 0; i < cands_.size(); ++i) {
        cum += cands_[i].weight;
        if (cum >= target) {
          cands_.resize(i + 1);
          break;
        }
      }
    } else {
      // min-p keeps a best-first prefix too, so the final set is the shorter
      // of the two prefixes: applying min-p first (with z still over all
      // candidates) gives the same set and leaves far fewer to select from.
      if (params_.min_p > 0.0f) {
        std::erase_if(cands_, [&](const Candidate& c) { return c.logit < min_p_logit; });
      }
      TopPUnsorted(max, target);
    }
  }

  // min-p: drop tokens whose probability is below min_p times the best one's.
  if (params_.min_p > 0.0f) {
    std::erase_if(cands_, [&](const Candidate& c) { return c.logit < min_p_logit; });
  }
  return !cands_.empty();
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history,
                        TokenConstraint* constraint) {
  PreparePenalizedLogits(logits, history);
  const int32_t id = Draw();
  if (constraint == nullptr || constraint->Allows(id)) return id;
  constraint->Mask(work_);
  // Nothing finite left: the constraint allows no token.
  if (std::none_of(work_.begin(), work_.end(), [](float l) { return l > kNegInf; })) return -1;
  return Draw();
}

int32_t Sampler::Draw() {
  if (params_.greedy()) return static_cast<int32_t>(ArgMax(work_));
  if (!Truncate()) return static_cast<int32_t>(ArgMax(work_));
  if (cands_.size() == 1) return cands_.front().id;

  // Temperature, softmax and the draw. cands_ is in a deterministic order
  // (best-first, or by id), so a seed fixes the result.
  float max = kNegInf;
  for (const Candidate& c : cands_) max = std::max(max, c.logit);
  const float inv_temp = 1.0f / params_.temperature;
  double total = 0.0;
  for (Candidate& c : cands_) {
    c.weight = std::exp((c.logit - max) * inv_temp);
    total += c.weight;
  }
  const double u = Uniform01() * total;
  double cum = 0.0;
  for (const Candidate& c : cands_) {
    cum += c.weight;
    if (u < cum) return c.id;
  }
  // Rounding left u at the very top: the last candidate with any weight.
  for (size_t i = cands_.size(); i-- > 0;) {
    if (cands_[i].weight > 0.0f) return cands_[i].id;
  }
  return cands_.front().id;
}

double Sampler::LogNormaliser(std::span<const float> logits) {
  return kernels::LogSumExp(logits.data(), static_cast<int64_t>(logits.size()));
}

std::vector<std::pair<int32_t, float>> Sampler::TopLogprobs(std::span<const float> logits, int n) {
  if (n <= 0 || logits.empty()) return {};
  return TopLogprobs(logits, n, LogNormaliser(logits));
}

std::vector<std::pair<int32_t, float>> Sampler::TopLogprobs(std::span<const float> logits, int n,
                                                            double lse) {
  std::vector<std::pair<int32_t, float>> out;
  if (n <= 0 || logits.empty()) return out;
  std::vector<Candidate> top;
  SelectTopK(logits, static_cast<size_t>(n), top);
  out.reserve(top.size());
  for (const Candidate& c : top) {
    const float lp = std::isfinite(lse) ? static_cast<float>(c.logit - lse) : kNegInf;
    out.emplace_back(c.id, std::isnan(lp) ? kNegInf : lp);
  }
  return out;
}

float Sampler::Logprob(std::span<const float> logits, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= logits.size()) return kNegInf;
  return Logprob(logits, id, LogNormaliser(logits));
}

float Sampler::Logprob(std::span<const float> logits, int32_t id, double lse) {
  if (id < 0 || static_cast<size_t>(id) >= logits.size()) return kNegInf;
  if (!std::isfinite(lse)) return kNegInf;
  const float lp = static_cast<float>(Clean(logits[id]) - lse);
  return std::isnan(lp) ? kNegInf : lp;
}

}  // namespace mx::engine
