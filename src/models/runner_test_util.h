// Test helper shared by the reference tests: a runner's logits for every
// position of tokens read in one Forward call. Test-only; header-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "models/runner.h"

namespace mx::models {

// [tokens.size()][n_vocab]; a failed Forward is a test failure.
inline std::vector<float> ReadAllPositions(Runner& runner, SequenceState* seq,
                                           const std::vector<int32_t>& tokens) {
  std::vector<BatchEntry> batch;
  for (int32_t t : tokens) batch.push_back({seq, t, true});
  std::vector<float> logits;
  const Status st = runner.Forward(batch, &logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return logits;
}

}  // namespace mx::models
