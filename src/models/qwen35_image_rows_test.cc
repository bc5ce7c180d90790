// tiny-qwen35 fed llama.cpp's image embeddings at llama.cpp's row positions
// (../shared/ref/README.md "qwen35 vision", steps 10-12): every row's logits
// match the reference, for three pictures and the text-only prompt; the
// rows give the same bits whether read at once or in chunks; generation
// continues at the position after the image's largest side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/model.h"
#include "models/runner.h"
#include "ref_vision.h"

namespace mx::models {
namespace {

using mx::testing::RefVisionRun;

struct Lm {
  std::unique_ptr<Model> model;
  std::unique_ptr<Runner> runner;
};

Lm LoadLm() {
  Lm lm;
  auto model = Model::Load(Env::Default(), mx::testing::VisionLmPath(),
                           {.progress = nullptr, .prefault = false});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return lm;
  lm.model = std::move(model).value();
  auto runner = Runner::Create(*lm.model, {.n_threads = 2, .kv_type = DType::kF32, .n_ctx = 512});
  EXPECT_TRUE(runner.ok());
  if (runner.ok()) lm.runner = std::move(runner).value();
  return lm;
}

// The prompt's rows as batch entries: tokens, or the image's embedding rows
// at the reference's positions.
std::vector<BatchEntry> Rows(const RefVisionRun& run, SequenceState* seq,
                             const std::vector<float>& embd, int64_t n_embd) {
  std::vector<BatchEntry> rows;
  for (size_t r = 0; r < run.tokens.size(); ++r) {
    const auto& p = run.pos_thwe[r];
    const kernels::RopePos pos{p[0], p[1], p[2], p[3]};
    if (run.tokens[r] < 0) {
      const int64_t i = static_cast<int64_t>(r) - run.image_first_row;
      rows.push_back(BatchEntry::Embedding(seq, &embd[static_cast<size_t>(i * n_embd)], pos, true));
    } else {
      BatchEntry e(seq, run.tokens[r], true);
      e.has_pos = true;
      e.pos = pos;
      rows.push_back(e);
    }
  }
  return rows;
}

TEST(Qwen35ImageRowsTest, EveryRowMatchesLlamaCpp) {
  Lm lm = LoadLm();
  ASSERT_NE(lm.runner, nullptr);
  const int64_t n_embd = lm.model->config().n_embd, n_vocab = lm.runner->n_vocab();
  const auto runs = mx::testing::LoadVisionRuns();
  ASSERT_EQ(runs.size(), 4u);
  for (const RefVisionRun& run : runs) {
    SCOPED_TRACE(run.name);
    std::vector<float> embd;
    if (!run.image.empty()) {
      embd = mx::testing::ReadF32File(run.embeddings_file);
      ASSERT_EQ(static_cast<int64_t>(embd.size()), run.nx * run.ny * n_embd);
    }
    const std::vector<float> want = mx::testing::ReadF32File(run.logits_file);
    ASSERT_EQ(want.size(), run.tokens.size() * static_cast<size_t>(n_vocab));
    auto seq = lm.runner->NewSequence();
    std::vector<float> got;
    ASSERT_TRUE(lm.runner->Forward(Rows(run, seq.get(), embd, n_embd), &got).ok());
    ASSERT_EQ(got.size(), want.size());
    float max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i)
      max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
    EXPECT_LT(max_diff, 1e-3f);
  }
}

TEST(Qwen35ImageRowsTest, ChunkedReadingGivesTheSameBits) {
  Lm lm = LoadLm();
  ASSERT_NE(lm.runner, nullptr);
  const int64_t n_embd = lm.model->config().n_embd;
  const RefVisionRun run = mx::testing::LoadVisionRuns().at(0);
  const std::vector<float> embd = mx::testing::ReadF32File(run.embeddings_file);
  auto whole = lm.runner->NewSequence();
  std::vector<float> once;
  ASSERT_TRUE(lm.runner->Forward(Rows(run, whole.get(), embd, n_embd), &once).ok());
  // Chunks of 7 rows: a chunk boundary falls inside the image.
  auto chunked = lm.runner->NewSequence();
  const std::vector<BatchEntry> rows = Rows(run, chunked.get(), embd, n_embd);
  std::vector<float> all, part;
  for (size_t b = 0; b < rows.size(); b += 7) {
    const size_t e = std::min(rows.size(), b + 7);
    ASSERT_TRUE(
        lm.runner->Forward(std::span<const BatchEntry>(rows.data() + b, e - b), &part).ok());
    all.insert(all.end(), part.begin(), part.end());
  }
  ASSERT_EQ(all.size(), once.size());
  EXPECT_EQ(0, std::memcmp(all.data(), once.data(), all.size() * sizeof(float)));
}

// The greedy continuation: each generated token at position
// n_past_after_prompt + i (63 for a prompt of 73 rows), up to the first step
// whose margin is below our error.
TEST(Qwen35ImageRowsTest, GreedyContinuesAfterTheImagesLargestSide) {
  Lm lm = LoadLm();
  ASSERT_NE(lm.runner, nullptr);
  const int64_t n_embd = lm.model->config().n_embd, n_vocab = lm.runner->n_vocab();
  for (const RefVisionRun& run : mx::testing::LoadVisionRuns()) {
    if (run.image.empty()) continue;
    SCOPED_TRACE(run.name);
    const std::vector<float> embd = mx::testing::ReadF32File(run.embeddings_file);
    auto seq = lm.runner->NewSequence();
    std::vector<BatchEntry> rows = Rows(run, seq.get(), embd, n_embd);
    for (size_t r = 0; r + 1 < rows.size(); ++r) rows[r].want_logits = false;
    std::vector<float> logits;
    ASSERT_TRUE(lm.runner->Forward(rows, &logits).ok());
    int64_t pos = run.n_past_after_prompt;
    for (size_t step = 0; step < run.greedy.size(); ++step) {
      const auto best = std::max_element(logits.begin(), logits.begin() + n_vocab) - logits.begin();
      if (run.greedy_margins[step] < 1e-2f) break;
      ASSERT_EQ(best, run.greedy[step]) << "step " << step;
      BatchEntry e(seq.get(), static_cast<int32_t>(best), true);
      e.has_pos = true;
      e.pos = kernels::RopePos::Text(pos++);
      ASSERT_TRUE(lm.runner->Forward(std::span<const BatchEntry>(&e, 1), &logits).ok());
    }
  }
}

}  // namespace
}  // namespace mx::models
