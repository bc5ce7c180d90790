// Sliding-window layers and the state operations the prompt cache is built
// on (docs/state_format.md "Sliding-window layers"), on ref tiny-gemma3
// (layers 0-4 local with a window of 32, layer 5 global): a state keeps
// every row of its local layers too, so a cut far behind the window, a copy
// of a shared start, a restored state cut back and a shifted state all
// continue exactly as a cold read of the same tokens (or, after a shift, as
// the same state read in any other way).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "models/model.h"
#include "models/runner.h"
#include "ref_data.h"

namespace mx::models {
namespace {

constexpr int64_t kWindow = 32;

std::vector<int32_t> RandomTokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto &x : t) x = static_cast<int32_t>(rng() % 4093);
  return t;
}

class SwaStateTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(DType::kF16); }
  void Open(DType kv_type) {
    auto model = Model::Load(Env::Default(), mx::testing::RefDir() + "/models/tiny-gemma3.gguf",
                             {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto runner = Runner::Create(*model_, {.n_threads = 2, .kv_type = kv_type, .n_ctx = 1024});
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
  }

  // Reads tokens [begin, end) into seq in chunks of `chunk`; the logits of
  // every position read, [end - begin][n_vocab].
  std::vector<float> Read(SequenceState *seq, const std::vector<int32_t> &tokens, size_t begin,
                          size_t end, size_t chunk) {
    std::vector<float> all, logits;
    for (size_t i = begin; i < end; i += chunk) {
      std::vector<BatchEntry> batch;
      for (size_t j = i; j < std::min(end, i + chunk); ++j) batch.push_back({seq, tokens[j], true});
      Status st = runner_->Forward(batch, &logits);
      EXPECT_TRUE(st.ok()) << st.ToString();
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }
  // The logits of positions [from, ...) of a cold read of `tokens`.
  std::vector<float> Cold(const std::vector<int32_t> &tokens, size_t from) {
    auto seq = runner_->NewSequence();
    std::vector<float> all = Read(seq.get(), tokens, 0, tokens.size(), tokens.size());
    return {all.begin() + static_cast<int64_t>(from) * runner_->n_vocab(), all.end()};
  }
  static bool BitEqual(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  // `a`'s first n tokens followed by `b`'s tokens from n on (an edited turn).
  static std::vector<int32_t> Spliced(const std::vector<int32_t> &a, const std::vector<int32_t> &b,
                                      size_t n) {
    std::vector<int32_t> out(a.begin(), a.begin() + static_cast<int64_t>(n));
    out.insert(out.end(), b.begin() + static_cast<int64_t>(n), b.end());
    return out;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Runner> runner_;
};

TEST_F(SwaStateTest, LayoutMarksTheLocalLayersAndTheirRopeBase) {
  const StateLayout &l = *runner_->layout();
  ASSERT_EQ(l.kv_dims.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(l.window(i), i < 5 ? kWindow : 0) << "layer " << i;
    EXPECT_EQ(l.rope_params(i).freq_base, i < 5 ? 1e4f : 1e6f) << "layer " << i;
    EXPECT_EQ(l.rope_params(i).freq_scale, 1.0f);
  }
  // Every layer keeps every row: the state costs what full attention costs.
  auto seq = runner_->NewSequence();
  Read(seq.get(), RandomTokens(100, 1), 0, 100, 100);
  EXPECT_EQ(l.kv_bytes_per_token(),
            6u * 2 * 32 * 2);  // 6 layers x K+V x 1 head of 32 x f16
  EXPECT_EQ(seq->SizeBytes(), 100 * l.kv_bytes_per_token());
  // The windows are part of the layout: a state of the same shape without them
  // is another layout.
  StateLayout dense = l;
  dense.windows.clear();
  dense.rope_local_layers.clear();
  EXPECT_NE(dense.Fingerprint(), l.Fingerprint());
}

// Reading in chunks, neighbours in the batch, or one token at a time past
// the window gives the bits of one batch.
TEST_F(SwaStateTest, ChunksAndNeighboursNeverChangeLogits) {
  auto a = RandomTokens(150, 2), b = RandomTokens(90, 3);
  const std::vector<float> want_a = Cold(a, 0), want_b = Cold(b, 0);
  for (size_t chunk : {1, 7, 32, 33, 64}) {
    SCOPED_TRACE(chunk);
    auto seq = runner_->NewSequence();
    EXPECT_TRUE(BitEqual(Read(seq.get(), a, 0, a.size(), chunk), want_a));
  }
  auto sa = runner_->NewSequence(), sb = runner_->NewSequence();
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < a.size(); ++i) {
    batch.push_back({sa.get(), a[i], true});
    if (i < b.size()) batch.push_back({sb.get(), b[i], true});
  }
  std::vector<float> logits;
  ASSERT_TRUE(runner_->Forward(batch, &logits).ok());
  const auto v = static_cast<size_t>(runner_->n_vocab());
  std::vector<float> got_a, got_b;
  for (size_t j = 0; j < batch.size(); ++j) {
    auto &out = batch[j].seq == sa.get() ? got_a : got_b;
    out.insert(out.end(), logits.begin() + static_cast<int64_t>(j * v),
               logits.begin() + static_cast<int64_t>((j + 1) * v));
  }
  EXPECT_TRUE(BitEqual(got_a, want_a));
  EXPECT_TRUE(BitEqual(got_b, want_b));
}

// An edited message far back in the chat: the state is cut to a point whose
// window lies long before its end, and the new tokens continue from there.
TEST_F(SwaStateTest, CutBackFarBehindTheWindowContinuesExactly) {
  auto first = RandomTokens(200, 4), edited = RandomTokens(200, 5);
  for (size_t cut : {1, 31, 32, 50, 150, 199}) {
    SCOPED_TRACE(cut);
    auto seq = runner_->NewSequence();
    Read(seq.get(), first, 0, first.size(), 64);
    ASSERT_TRUE(seq->Truncate(static_cast<int64_t>(cut)).ok());
    const std::vector<int32_t> turn = Spliced(first, edited, cut);
    EXPECT_TRUE(BitEqual(Read(seq.get(), turn, cut, turn.size(), 40), Cold(turn, cut)));
  }
}

// Another chat with the same start: a copy of [0, n) continues as a cold read.
TEST_F(SwaStateTest, CopyOfASharedStartContinuesExactly) {
  auto first = RandomTokens(180, 6), other = RandomTokens(220, 7);
  auto seq = runner_->NewSequence();
  Read(seq.get(), first, 0, first.size(), 180);
  for (size_t n : {10, 70, 179}) {
    SCOPED_TRACE(n);
    auto copy = seq->ClonePrefix(static_cast<int64_t>(n));
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    const std::vector<int32_t> turn = Spliced(first, other, n);
    EXPECT_TRUE(BitEqual(Read(copy->get(), turn, n, turn.size(), 25), Cold(turn, n)));
  }
  EXPECT_EQ(seq->n_tokens(), 180);
}

// A saved state read back (a restart), then the next turn after an edit
// that goes back behind the window, and generation token by token.
TEST_F(SwaStateTest, RestoredStateCutBackContinuesExactly) {
  auto first = RandomTokens(160, 8), edited = RandomTokens(190, 9);
  auto seq = runner_->NewSequence();
  Read(seq.get(), first, 0, first.size(), 160);
  const std::string bytes = seq->Serialize();
  EXPECT_EQ(bytes.size(), 28 + 160 * runner_->layout()->kv_bytes_per_token());
  auto back = SequenceState::Deserialize(runner_->layout(), bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE((*back)->Truncate(90).ok());
  const std::vector<int32_t> turn = Spliced(first, edited, 90);
  EXPECT_TRUE(BitEqual(Read(back->get(), turn, 90, turn.size(), 1), Cold(turn, 90)));
}

// A context shift re-rotates each layer's kept keys with that layer's own
// RoPE: the local base on local layers, the global one on the global layer.
TEST_F(SwaStateTest, ShiftRotatesEachLayerWithItsOwnBase) {
  Open(DType::kF32);
  const StateLayout &l = *runner_->layout();
  auto seq = runner_->NewSequence();
  Read(seq.get(), RandomTokens(120, 10), 0, 120, 120);
  const int64_t p0 = 10, p1 = 60, d = p1 - p0, n_move = 120 - p1;
  const int hd = static_cast<int>(l.head_dim);
  std::vector<std::vector<float>> before(l.kv_dims.size());
  for (size_t i = 0; i < l.kv_dims.size(); ++i) {
    const auto *k = reinterpret_cast<const float *>(seq->k_row(i, p1));
    before[i].assign(k, k + n_move * l.kv_dims[i]);
  }
  ASSERT_TRUE(seq->RemoveSpan(p0, p1).ok());
  for (size_t i = 0; i < l.kv_dims.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const int64_t dims = l.kv_dims[i];
    const int n_heads = static_cast<int>(dims / hd);
    kernels::RopeParams own = l.rope_params(i), other = l.rope_params(i < 5 ? 5 : 0);
    own.rotation_only = other.rotation_only = true;
    float wrong_base_diff = 0;
    for (int64_t p = 0; p < n_move; ++p) {
      std::vector<float> want(before[i].begin() + p * dims, before[i].begin() + (p + 1) * dims);
      std::vector<float> wrong = want;
      kernels::Rope(want.data(), n_heads, hd, own, -d);
      kernels::Rope(wrong.data(), n_heads, hd, other, -d);
      const auto *got = reinterpret_cast<const float *>(seq->k_row(i, p0 + p));
      ASSERT_EQ(std::memcmp(got, want.data(), static_cast<size_t>(dims) * sizeof(float)), 0)
          << "row " << p;
      for (int64_t j = 0; j < dims; ++j)
        wrong_base_diff = std::max(wrong_base_diff, std::fabs(got[j] - wrong[j]));
    }
    EXPECT_GT(wrong_base_diff,
              1e-2f);  // the other base would have rotated them elsewhere
  }
}

// A shifted state is a state like any other: its next turn gives the same
// bits in chunks, from a copy and after a save and restore, and its local
// layers see the window of the new positions.
TEST_F(SwaStateTest, ShiftedStateContinuesTheSameEveryWay) {
  auto tokens = RandomTokens(150, 11), more = RandomTokens(80, 12);
  auto seq = runner_->NewSequence();
  Read(seq.get(), tokens, 0, tokens.size(), 150);
  ASSERT_TRUE(seq->RemoveSpan(20, 90).ok());
  ASSERT_EQ(seq->n_tokens(), 80);
  auto copy = seq->ClonePrefix(80);
  ASSERT_TRUE(copy.ok());
  auto restored = SequenceState::Deserialize(runner_->layout(), seq->Serialize());
  ASSERT_TRUE(restored.ok());
  const std::vector<float> want = Read(seq.get(), more, 0, more.size(), 80);
  EXPECT_TRUE(BitEqual(Read(copy->get(), more, 0, more.size(), 9), want));
  EXPECT_TRUE(BitEqual(Read(restored->get(), more, 0, more.size(), 1), want));
}

}  // namespace
}  // namespace mx::models
