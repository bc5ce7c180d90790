// Token sampling from logits, in the order of llama.cpp's default chain:
// logit bias -> penalties (repetition, frequency, presence) -> top-k -> top-p
// -> min-p -> temperature -> softmax -> draw, optionally under a
// TokenConstraint (constrained decoding). Plus the log-probabilities the
// OpenAI API reports (`logprobs`, `top_logprobs`).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/token_constraint.h"

namespace mx::engine {

// Per-request sampling settings (OpenAI / llama.cpp server names and defaults).
struct SamplingParams {
  float temperature = 0.8f;     // [0, 2]; 0 = greedy (argmax)
  int top_k = 40;               // >= 0; 0 = off
  float top_p = 0.95f;          // (0, 1]; 1 = off
  float min_p = 0.05f;          // [0, 1); 0 = off
  float repeat_penalty = 1.0f;  // > 0; 1 = off
  int repeat_last_n = 64;       // >= -1; tokens of history penalised; 0 = off, -1 = all
  // OpenAI's penalties over the same window as repeat_penalty (as llama.cpp):
  // logit -= frequency_penalty * count + presence_penalty * (count > 0).
  float frequency_penalty = 0.0f;  // [-2, 2]; 0 = off
  float presence_penalty = 0.0f;   // [-2, 2]; 0 = off
  // Added to the token's logit before everything else (OpenAI's logit_bias;
  // -infinity bans it). Ids outside the vocabulary are ignored.
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;  // 0 = a random seed
  bool greedy() const { return temperature <= 0; }
};

// Checks every field against the ranges above. InvalidArgument naming the
// field, its range and the value otherwise (NaN is out of every range).
Status ValidateSamplingParams(const SamplingParams& params);

// Draws tokens for one sequence. Not thread-safe: one Sampler per sequence.
// REQUIRES: ValidateSamplingParams(params).ok() (checked by the caller, which
// turns a bad request into an error before a Sampler exists).
class Sampler {
 public:
  // Seeds a std::mt19937_64 with params.seed, or with std::random_device when it
  // is 0 (seed() then tells which seed was drawn, for reproducing the run).
  explicit Sampler(const SamplingParams& params);

  // Returns the next token id in [0, logits.size()).
  //   logits:  n_vocab values for the next position (not modified). NaN counts as
  //            -infinity. When the best value is not finite (all -infinity or NaN,
  //            or some +infinity) returns the greedy choice (id 0 if all are -inf).
  //   history: the tokens so far (prompt + generated), for the repetition penalty;
  //            ids outside [0, n_vocab) are ignored.
  // Greedy (temperature <= 0): the argmax after the repetition penalty, ties to
  // the lowest id; consumes no randomness. Otherwise the draw walks the surviving
  // candidates in a fixed order (best first after top-k, else by id) with one
  // 53-bit uniform from the mt19937_64, so a seed fixes the sequence.
  // With a constraint: the drawn token is checked with constraint->Allows;
  // only when it is refused are the refused tokens masked and the draw made
  // again over what is left (so the result follows the masked distribution,
  // and a reply that keeps to the constraint costs one check per token).
  // Returns -1 when the constraint allows no token at all. The constraint is
  // not advanced (the caller Accepts the token it keeps).
  // REQUIRES: !logits.empty().
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history,
                 TokenConstraint* constraint = nullptr);

  const SamplingParams& params() const { return params_; }
  // The seed in use (params.seed, or the one drawn when that was 0).
  uint64_t seed() const { return seed_; }

  // The `n` most likely tokens with their natural-log probabilities under the
  // full softmax of the unmodified logits (temperature 1, no penalty, no
  // truncation), sorted by probability descending, ties by lower id. n <= 0 ->
  // empty; n > n_vocab -> all tokens. NaN logits count as -infinity.
  static std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int n);
  // log softmax(logits)[id]; -infinity when id is outside [0, logits.size()).
  static float Logprob(std::span<const float> logits, int32_t id);
  // The softmax's normaliser, log(sum(exp(logits))) (kernels.h LogSumExp),
  // and the two above given it: a token's logprob and its top alternatives
  // cost one pass over the vocabulary.
  static double LogNormaliser(std::span<const float> logits);
  static std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int n,
                                                            double log_normaliser);
  static float Logprob(std::span<const float> logits, int32_t id, double log_normaliser);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float weight = 0.0f;  // exp(logit - max logit), filled by the top-p step
  };

  // work_ = logits with NaN -> -inf, the logit bias and the penalties applied.
  void PreparePenalizedLogits(std::span<const float> logits, std::span<const int32_t> history);
  // One draw from work_ (greedy, or truncation, temperature and the draw).
  int32_t Draw();
  // Fills cands_ with the candidates of work_ surviving top-k, top-p and min-p.
  // False when no logit is finite (the caller then falls back to the argmax).
  bool Truncate();
  // The candidate order: logit descending, then id ascending (a strict total order).
  static bool Better(const Candidate& a, const Candidate& b);
  // The k best of `values` (NaN as -inf) into `out`, best first: logit
  // descending, id ascending. A bounded heap: O(n log k), no full sort.
  static void SelectTopK(std::span<const float> values, size_t k, std::vector<Candidate>& out);
  // Top-p over cands_ in any order (weights filled): keeps, in the same order,
  // the smallest best-first prefix whose weight reaches `target`. O(n) bucket
  // pass plus a sort of one bucket, instead of a sort of the whole set.
  void TopPUnsorted(float max_logit, double target);
  // A uniform double in [0, 1) from 53 random bits (same on every platform).
  double Uniform01();

  SamplingParams params_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::vector<float> work_;         // [n_vocab] scratch, reused across calls
  std::vector<Candidate> cands_;    // scratch, reused across calls
  std::vector<Candidate> select_;   // scratch for TopPUnsorted
  std::vector<double> bin_weight_;  // scratch for TopPUnsorted
  std::vector<int32_t> seen_;       // [n_vocab] counts for the penalties, all 0 between calls
};

}  // namespace mx::engine
