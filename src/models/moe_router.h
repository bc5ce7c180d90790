// MoeRouter: chooses a token's experts and their weights from the router's
// logits, as llama.cpp 81ff7abe5 does (build_moe_ffn; ref/README-moe.md
// "Routing"): the rule of ModelConfig::moe, in float32, with the sums llama.cpp
// takes in double taken in double. The experts come out best first (the order
// the runner adds their outputs in); equal scores keep the lower expert id
// first, so a token's choice depends on nothing but its own logits (a NaN
// score counts as -inf).
//
// Thread-safety: one Route() at a time per router (it owns its scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_config.h"

namespace mx::models {

class MoeRouter {
 public:
  explicit MoeRouter(const MoeConfig& m) : m_(m) {}

  // logits: [n_expert], the router's output with its bias added (gpt-oss).
  // selection_bias: [n_expert] or null. Writes the k = n_expert_used chosen
  // expert ids to experts[0..k) and their weights to weights[0..k); when
  // gaps is set, also the ranked score of the k-th minus the (k+1)-th
  // expert (the decision's margin; 0 when k = n_expert).
  void Route(const float* logits, const float* selection_bias, int32_t* experts, float* weights,
             float* gap = nullptr);

 private:
  const MoeConfig& m_;
  std::vector<float> p_, s_, group_score_;
  std::vector<int32_t> order_, groups_;
};

}  // namespace mx::models
