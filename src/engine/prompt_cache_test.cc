// The prompt cache never changes an answer: greedy replies computed from
// pooled states (reused in place, truncated, copied, after evictions, with
// concurrent users) equal, token for token, replies computed by reading the
// whole prompt into a fresh state.
#include "engine/prompt_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <unistd.h>

#include "models/model.h"
#include "models/synthetic_model.h"

namespace mx::engine {
namespace {

// Random token ids below 4000, from a fixed seed.
class TokenSource {
 public:
  explicit TokenSource(uint32_t seed) : rng_(seed) {}
  std::vector<int32_t> operator()(int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng_() % 4000);
    return t;
  }

 private:
  std::mt19937 rng_;
};

// A chat to trim: a 12-token system prompt, then five 40-token turns.
void FiveTurnChat(TokenSource& random_tokens, std::vector<int32_t>* system,
                  std::vector<std::vector<int32_t>>* turns, std::vector<int32_t>* chat) {
  *system = random_tokens(12);
  *chat = *system;
  for (int i = 0; i < 5; ++i) {
    turns->push_back(random_tokens(40));
    chat->insert(chat->end(), turns->back().begin(), turns->back().end());
  }
}

// How far state a's logits are from state b's: reads prompt_a[from_a:] into
// a and prompt_b[from_b:] into b, then feeds both the same tokens (b's greedy
// choices, so the two always see the same continuation) and compares their
// logit rows at each of `steps` positions.
struct LogitGap {
  double mean_abs = 0;  // mean over positions and vocabulary of |logit a - logit b|
  double max_abs = 0;   // largest |logit a - logit b| seen
  int argmax_agree = 0;  // positions where both pick the same greedy token
};
LogitGap MeasureLogitGap(models::Runner& runner, models::SequenceState* a, const std::vector<int32_t>& prompt_a,
                         int64_t from_a, models::SequenceState* b, const std::vector<int32_t>& prompt_b,
                         int64_t from_b, int steps) {
  const size_t v = static_cast<size_t>(runner.n_vocab());
  auto read = [&](models::SequenceState* s, const std::vector<int32_t>& prompt, int64_t from, std::vector<float>* l) {
    std::vector<models::BatchEntry> batch;
    for (size_t i = static_cast<size_t>(from); i < prompt.size(); ++i) {
      batch.push_back({s, prompt[i], i + 1 == prompt.size()});
    }
    EXPECT_TRUE(runner.Forward(batch, l).ok());
  };
  std::vector<float> la, lb;
  read(a, prompt_a, from_a, &la);
  read(b, prompt_b, from_b, &lb);
  LogitGap gap;
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < v; ++i) {
      const double d = std::fabs(static_cast<double>(la[i]) - static_cast<double>(lb[i]));
      gap.mean_abs += d;
      gap.max_abs = std::max(gap.max_abs, d);
    }
    const auto best_a = std::max_element(la.begin(), la.end()) - la.begin();
    const auto best_b = std::max_element(lb.begin(), lb.end()) - lb.begin();
    gap.argmax_agree += best_a == best_b;
    models::BatchEntry ea{a, static_cast<int32_t>(best_b), true}, eb{b, static_cast<int32_t>(best_b), true};
    EXPECT_TRUE(runner.Forward({&ea, 1}, &la).ok());
    EXPECT_TRUE(runner.Forward({&eb, 1}, &lb).ok());
  }
  gap.mean_abs /= static_cast<double>(v) * steps;
  return gap;
}

// Param: a reference model's name, optionally ":kv type" (default f16).
class PromptCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string name = GetParam().substr(0, GetParam().find(':'));
    DType kv = DType::kF16;
    if (GetParam().find(':') != std::string::npos) {
      ASSERT_TRUE(DTypeFromName(GetParam().substr(GetParam().find(':') + 1), &kv)) << GetParam();
    }
    auto model = models::Model::Load(Env::Default(),
                                     std::string(MATRICXON_REF_DIR) + "/models/" + name + ".gguf",
                                     {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok());
    model_ = std::move(model).value();
    auto runner = models::Runner::Create(*model_, {.n_threads = 2, .kv_type = kv, .n_ctx = 2048});
    ASSERT_TRUE(runner.ok());
    runner_ = std::move(runner).value();
  }

  // Reads prompt[from:] into each state (all requests in one batch per step,
  // like the scheduler) and generates n tokens greedily for each.
  std::vector<std::vector<int32_t>> Generate(std::vector<models::SequenceState*> states,
                                             std::vector<std::vector<int32_t>> prompts,
                                             std::vector<int64_t> from, int n) {
    const size_t k = states.size();
    std::vector<std::vector<int32_t>> out(k);
    std::vector<models::BatchEntry> batch;
    std::vector<size_t> owner;
    for (size_t r = 0; r < k; ++r) {
      for (size_t i = static_cast<size_t>(from[r]); i < prompts[r].size(); ++i) {
        batch.push_back({states[r], prompts[r][i], i + 1 == prompts[r].size()});
        owner.push_back(r);
      }
    }
    std::vector<float> logits;
    for (int step = 0; step < n; ++step) {
      EXPECT_TRUE(runner_->Forward(batch, &logits).ok());
      const size_t v = static_cast<size_t>(runner_->n_vocab());
      batch.clear();
      size_t row = 0;
      for (size_t r = 0; r < k; ++r) {
        const float* l = &logits[row++ * v];
        int32_t tok = static_cast<int32_t>(std::max_element(l, l + v) - l);
        out[r].push_back(tok);
        batch.push_back({states[r], tok, true});
      }
      if (step + 1 == n) break;  // the last token is returned, not read
    }
    return out;
  }

  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Runner> runner_;
};

TEST_P(PromptCacheTest, RandomChatsGiveTheSameGreedyRepliesWithAndWithoutThePool) {
  // Small limits force evictions and copies.
  PromptCacheOptions options;
  options.slots = 3;
  options.budget_bytes = 60 * runner_->layout()->kv_bytes_per_token() + runner_->layout()->recurrent_bytes() * 3;
  PromptCache cache(*runner_, options, Env::Default());

  std::mt19937 rng(1234);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 4000);
    return t;
  };
  const std::vector<std::vector<int32_t>> systems = {random_tokens(12), random_tokens(20)};
  std::vector<std::vector<int32_t>> chats;  // each chat's latest prompt + reply
  int reused_requests = 0, copies = 0;
  constexpr int kReply = 4;

  for (int step = 0; step < 40; ++step) {
    // Pick one or two requests for this step.
    const int n_req = (rng() % 4 == 0) ? 2 : 1;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<size_t> chat_of;
    for (int r = 0; r < n_req; ++r) {
      std::vector<int32_t> prompt;
      int action = chats.empty() ? 0 : static_cast<int>(rng() % 4);
      if (action == 0) {  // a new chat with a shared system prompt
        prompt = systems[rng() % systems.size()];
        auto user = random_tokens(3 + static_cast<int>(rng() % 8));
        prompt.insert(prompt.end(), user.begin(), user.end());
        chats.push_back(prompt);
        chat_of.push_back(chats.size() - 1);
      } else {
        chat_of.push_back(rng() % chats.size());
        auto& chat = chats[chat_of.back()];
        prompt = chat;
        if (action == 1 || action == 2) {  // next turn
          auto user = random_tokens(2 + static_cast<int>(rng() % 6));
          prompt.insert(prompt.end(), user.begin(), user.end());
        } else if (prompt.size() > kReply + 2) {  // regenerate / edit the last reply
          prompt.resize(prompt.size() - kReply - static_cast<size_t>(rng() % 2));
        }
        chat = prompt;
      }
      prompts.push_back(prompt);
    }

    // With the pool.
    std::vector<CacheTicket> tickets;
    std::vector<models::SequenceState*> states;
    std::vector<int64_t> from;
    for (const auto& p : prompts) {
      auto t = cache.Start(p, /*use_cache=*/true, /*has_images=*/false);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      PromptCacheOptions so;
      so.snapshot_every = 16;
      PlanStateSnapshots(t->state(),
                         {.prompt_len = static_cast<int64_t>(p.size()),
                          .n_reused = t->n_reused(),
                          .diverged_at = t->diverged_at()},
                         SnapshotLimitsFor(so, *runner_->layout()));
      ASSERT_EQ(t->state().n_tokens(), t->n_reused());
      reused_requests += t->n_reused() > 0;
      copies += t->log_line().find("copy") != std::string::npos;
      from.push_back(t->n_reused());
      tickets.push_back(std::move(t).value());
    }
    for (auto& t : tickets) states.push_back(&t.state());
    auto cached = Generate(states, prompts, from, kReply);

    // Without: every prompt read whole into a fresh state.
    std::vector<std::unique_ptr<models::SequenceState>> fresh;
    states.clear();
    for (size_t r = 0; r < prompts.size(); ++r) {
      fresh.push_back(runner_->NewSequence());
      states.push_back(fresh.back().get());
    }
    auto uncached = Generate(states, prompts, std::vector<int64_t>(prompts.size(), 0), kReply);
    ASSERT_EQ(cached, uncached) << "step " << step << ": " << tickets[0].log_line();

    for (size_t r = 0; r < prompts.size(); ++r) {
      std::vector<int32_t> held = prompts[r];
      held.insert(held.end(), cached[r].begin(), cached[r].end() - 1);  // the last token was not read
      ASSERT_EQ(tickets[r].state().n_tokens(), static_cast<int64_t>(held.size()));
      // The chat's next prompt carries the whole reply.
      chats[chat_of[r]] = held;
      chats[chat_of[r]].push_back(cached[r].back());
      cache.Finish(std::move(tickets[r]), held, static_cast<int64_t>(prompts[r].size()));
    }
  }
  // Hybrid states restart from snapshots, so they reuse about as often as dense ones.
  EXPECT_GT(reused_requests, 15);
  EXPECT_GT(copies, 0);
  EXPECT_GT(cache.pool().counters().evictions, 0u);
}

TEST_P(PromptCacheTest, CacheOffLeavesThePoolUntouched) {
  PromptCache cache(*runner_, {}, Env::Default());
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
  auto t = cache.Start(prompt, /*use_cache=*/false, false);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->pooled());
  EXPECT_NE(t->log_line().find("cache_prompt: false"), std::string::npos);
  cache.Finish(std::move(t).value(), {}, 0);
  EXPECT_TRUE(cache.pool().Stats().empty());
  auto img = cache.Start(prompt, true, /*has_images=*/true);
  ASSERT_TRUE(img.ok());
  EXPECT_NE(img->log_line().find("the prompt has images"), std::string::npos);
  EXPECT_EQ(cache.pool().counters().lookups, 0u);
}

TEST_P(PromptCacheTest, LogLinesSayWhatWasReused) {
  PromptCache cache(*runner_, {}, Env::Default());
  std::vector<int32_t> p1 = {10, 11, 12, 13, 14, 15, 16, 17};
  auto t = cache.Start(p1, true, false);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->log_line(), "re-reading the entire chat (8 tokens): RAM holds no conversations");
  Generate({&t->state()}, {p1}, {0}, 1);
  cache.Finish(std::move(t).value(), p1, 8);
  std::vector<int32_t> p2 = p1;
  p2.push_back(99);
  auto t2 = cache.Start(p2, true, false);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->log_line(), "reused 8 of 9 tokens from RAM");
  cache.Abandon(std::move(t2).value());
  EXPECT_TRUE(cache.pool().Stats().empty());  // a failed request's entry is dropped
}

// A chat trimmed by its client (system prompt kept, oldest turns dropped)
// keeps its cache through a context shift. The result is approximate (kept
// tokens were computed while seeing the dropped ones), so the shifted state
// is held to this: over 16 positions its logits are nearer a full re-read of
// the trimmed chat than those of the untrimmed chat (the trim ignored). On
// these models (measured): tiny-llama 0.28 against 0.37 mean |dlogit|,
// tiny-qwen2-bf16 0.34 against 0.39; a shift that moves the rows but leaves
// their keys rotated for their old positions gives 0.47 and 0.42 and fails.
// Without a shift the reply is exact. ShiftIsExactOnAOneLayerModel holds the
// shift itself to a tight bound.
TEST_P(PromptCacheTest, TrimmedChatKeepsItsCacheThroughAShift) {
  const bool recurrent = runner_->layout()->n_recurrent > 0;
  for (bool shift_on : {true, false}) {
    PromptCacheOptions options;
    options.context_shift = shift_on;
    PromptCache cache(*runner_, options, Env::Default());
    TokenSource random_tokens(99);
    std::vector<int32_t> system, chat;
    std::vector<std::vector<int32_t>> turns;
    FiveTurnChat(random_tokens, &system, &turns, &chat);
    auto t1 = cache.Start(chat, true, false);
    ASSERT_TRUE(t1.ok());
    Generate({&t1->state()}, {chat}, {0}, 1);
    cache.Finish(std::move(t1).value(), chat, static_cast<int64_t>(chat.size()));

    // The client drops the two oldest turns and adds a new one.
    std::vector<int32_t> trimmed = system;
    for (int i = 2; i < 5; ++i) trimmed.insert(trimmed.end(), turns[static_cast<size_t>(i)].begin(), turns[static_cast<size_t>(i)].end());
    auto next = random_tokens(8);
    trimmed.insert(trimmed.end(), next.begin(), next.end());
    auto t2 = cache.Start(trimmed, true, false);
    ASSERT_TRUE(t2.ok());
    if (shift_on && !recurrent) {
      EXPECT_NE(t2->log_line().find("after a context shift (dropped 80 trimmed tokens at position 12)"),
                std::string::npos)
          << t2->log_line();
      EXPECT_EQ(t2->n_reused(), 12 + 120);
    } else {
      EXPECT_EQ(t2->log_line().find("context shift"), std::string::npos) << t2->log_line();
      EXPECT_LE(t2->n_reused(), 12);
    }
    ASSERT_EQ(t2->state().n_tokens(), t2->n_reused());
    if (shift_on && !recurrent) {
      constexpr int kSteps = 16;
      auto fresh = runner_->NewSequence();
      const LogitGap shifted = MeasureLogitGap(*runner_, &t2->state(), trimmed, t2->n_reused(), fresh.get(),
                                               trimmed, 0, kSteps);
      std::vector<int32_t> untrimmed = chat;
      untrimmed.insert(untrimmed.end(), next.begin(), next.end());
      auto ignored = runner_->NewSequence();
      auto fresh_again = runner_->NewSequence();
      const LogitGap trim_ignored =
          MeasureLogitGap(*runner_, ignored.get(), untrimmed, 0, fresh_again.get(), trimmed, 0, kSteps);
      // On a sliding-window model (tiny-gemma3) ignoring the trim is itself
      // close to a re-read: the local layers see only the last positions,
      // the same tokens either way, and only the global layer sees the
      // dropped ones; measured: shifted 0.16, trim ignored 0.15. There the
      // shift is held within 1.5 times of it (sequence_state_swa_test checks
      // the rotation itself, layer by layer).
      const double bound =
          runner_->layout()->windows.empty() ? trim_ignored.mean_abs : 1.5 * trim_ignored.mean_abs;
      EXPECT_LT(shifted.mean_abs, bound)
          << "shifted: mean " << shifted.mean_abs << " max " << shifted.max_abs << ", greedy agrees at "
          << shifted.argmax_agree << " of " << kSteps << "; trim ignored: mean " << trim_ignored.mean_abs
          << " max " << trim_ignored.max_abs << ", agrees at " << trim_ignored.argmax_agree;
    } else {
      auto shifted = Generate({&t2->state()}, {trimmed}, {t2->n_reused()}, 8);
      auto fresh_state = runner_->NewSequence();
      auto fresh = Generate({fresh_state.get()}, {trimmed}, {0}, 8);
      EXPECT_EQ(shifted, fresh);  // exact without a shift
    }
    cache.Abandon(std::move(t2).value());
  }
}

// With one layer a kept token's keys and values depend on the token and its
// position only, never on the tokens before it, so a correct shift (rows moved
// down, keys re-rotated by the distance) gives the state a fresh read of the
// trimmed chat would: the logits agree to rounding (measured: 6e-4 max
// |dlogit| over 16 positions; the re-rotated F16 keys are rounded once more).
// A shift that leaves the keys rotated for their old positions is 1.25 off
// and one that re-rotates by one position too few 0.56.
TEST(PromptCacheShiftTest, ShiftIsExactOnAOneLayerModel) {
  models::SyntheticSpec spec;
  spec.n_layer = 1;
  const std::string path =
      std::string(::testing::TempDir()) + "/prompt_cache_one_layer_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, path).ok());
  auto model = models::Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  std::remove(path.c_str());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto runner = models::Runner::Create(**model, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 2048});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  PromptCacheOptions options;
  options.context_shift = true;
  PromptCache cache(**runner, options, Env::Default());
  TokenSource random_tokens(7);
  std::vector<int32_t> system, chat;
  std::vector<std::vector<int32_t>> turns;
  FiveTurnChat(random_tokens, &system, &turns, &chat);
  {
    auto t1 = cache.Start(chat, true, false);
    ASSERT_TRUE(t1.ok());
    std::vector<models::BatchEntry> batch;
    for (int32_t tok : chat) batch.push_back({&t1->state(), tok, false});
    std::vector<float> logits;
    ASSERT_TRUE((*runner)->Forward(batch, &logits).ok());
    cache.Finish(std::move(t1).value(), chat, static_cast<int64_t>(chat.size()));
  }
  std::vector<int32_t> trimmed = system;
  for (size_t i = 2; i < turns.size(); ++i) trimmed.insert(trimmed.end(), turns[i].begin(), turns[i].end());
  const std::vector<int32_t> next = random_tokens(8);
  trimmed.insert(trimmed.end(), next.begin(), next.end());
  auto t2 = cache.Start(trimmed, true, false);
  ASSERT_TRUE(t2.ok());
  ASSERT_NE(t2->log_line().find("after a context shift"), std::string::npos) << t2->log_line();
  ASSERT_EQ(t2->n_reused(), 12 + 120);
  constexpr int kSteps = 16;
  auto fresh = (*runner)->NewSequence();
  const LogitGap gap =
      MeasureLogitGap(**runner, &t2->state(), trimmed, t2->n_reused(), fresh.get(), trimmed, 0, kSteps);
  EXPECT_LT(gap.max_abs, 0.01) << "mean " << gap.mean_abs;
  EXPECT_EQ(gap.argmax_agree, kSteps);
  cache.Abandon(std::move(t2).value());
}

// Hybrid model, snapshots chosen by the policy: chat X reads on in place
// with a long message while chat Y, which shares only X's notes (its first
// message), starts. X's new snapshots never push out the one at the end of
// the notes, so Y copies the notes instead of re-reading them, and its reply
// equals a fresh read. With a byte budget of two snapshots a state holds two.
class PromptCacheSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = models::Model::Load(
        Env::Default(), std::string(MATRICXON_REF_DIR) + "/models/tiny-hybrid-nemotron_h.gguf",
        {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok());
    model_ = std::move(model).value();
    auto runner =
        models::Runner::Create(*model_, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 2048});
    ASSERT_TRUE(runner.ok());
    runner_ = std::move(runner).value();
  }
  // Plans the ticket's snapshots, reads prompt[n_reused:] and generates n
  // tokens greedily (the last one is returned, not read).
  std::vector<int32_t> Read(CacheTicket& t, const std::vector<int32_t>& prompt,
                            const std::vector<int64_t>& starts, const PromptCacheOptions& options,
                            int n) {
    PlanStateSnapshots(t.state(),
                       {.prompt_len = static_cast<int64_t>(prompt.size()),
                        .n_reused = t.n_reused(),
                        .message_starts = starts,
                        .diverged_at = t.diverged_at()},
                       SnapshotLimitsFor(options, *runner_->layout()));
    return Greedy(&t.state(), prompt, t.n_reused(), n);
  }
  std::vector<int32_t> Greedy(models::SequenceState* s, const std::vector<int32_t>& prompt,
                              int64_t from, int n) {
    std::vector<models::BatchEntry> batch;
    for (size_t i = static_cast<size_t>(from); i < prompt.size(); ++i) {
      batch.push_back({s, prompt[i], i + 1 == prompt.size()});
    }
    std::vector<int32_t> out;
    std::vector<float> logits;
    for (int step = 0; step < n; ++step) {
      EXPECT_TRUE(runner_->Forward(batch, &logits).ok());
      out.push_back(
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      if (step + 1 < n) batch = {{s, out.back(), true}};
    }
    return out;
  }
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Runner> runner_;
};

TEST_F(PromptCacheSnapshotTest, ALongTurnKeepsTheSharedNotesForAnotherChat) {
  PromptCacheOptions options;
  options.snapshot_every = 64;
  PromptCache cache(*runner_, options, Env::Default());
  TokenSource random_tokens(3);
  const std::vector<int32_t> notes = random_tokens(100);
  std::vector<int32_t> x = notes;
  const std::vector<int32_t> q1 = random_tokens(20);
  x.insert(x.end(), q1.begin(), q1.end());
  auto t1 = cache.Start(x, true, false);
  ASSERT_TRUE(t1.ok());
  std::vector<int32_t> reply = Read(*t1, x, {0, 100}, options, 4);
  std::vector<int32_t> held = x;
  held.insert(held.end(), reply.begin(), reply.end() - 1);
  cache.Finish(std::move(t1).value(), held, static_cast<int64_t>(x.size()));

  // X's next turn: the reply, then a long message, read in place.
  std::vector<int32_t> x2 = x;
  x2.insert(x2.end(), reply.begin(), reply.end());
  const int64_t last_start = static_cast<int64_t>(x2.size());
  const std::vector<int32_t> long_message = random_tokens(900);
  x2.insert(x2.end(), long_message.begin(), long_message.end());
  auto t2 = cache.Start(x2, true, false);
  ASSERT_TRUE(t2.ok());
  ASSERT_EQ(t2->n_reused(), static_cast<int64_t>(held.size()));
  Read(*t2, x2, {0, 100, 120, last_start}, options, 2);
  const std::vector<int64_t> kept = t2->state().SnapshotPositions();
  EXPECT_LE(kept.size(), models::SequenceState::kMaxSnapshots);
  EXPECT_NE(std::find(kept.begin(), kept.end(), 100), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), last_start), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), static_cast<int64_t>(x2.size()) - 1), kept.end());

  // Y, while X is still in use: the notes and another question.
  std::vector<int32_t> y = notes;
  const std::vector<int32_t> q2 = random_tokens(15);
  y.insert(y.end(), q2.begin(), q2.end());
  auto ty = cache.Start(y, true, false);
  ASSERT_TRUE(ty.ok());
  EXPECT_EQ(ty->n_reused(), 100) << ty->log_line();
  EXPECT_EQ(ty->diverged_at(), 100);
  std::vector<int32_t> y_reply = Read(*ty, y, {0, 100}, options, 4);
  auto fresh = runner_->NewSequence();
  EXPECT_EQ(y_reply, Greedy(fresh.get(), y, 0, 4));
  cache.Abandon(std::move(ty).value());
  cache.Abandon(std::move(t2).value());
}

TEST_F(PromptCacheSnapshotTest, TheByteBudgetBoundsTheSnapshotsOfAState) {
  PromptCacheOptions options;
  options.snapshot_every = 32;
  options.snapshot_budget_bytes = 2 * runner_->layout()->recurrent_bytes() + 1;
  PromptCache cache(*runner_, options, Env::Default());
  TokenSource random_tokens(4);
  const std::vector<int32_t> prompt = random_tokens(300);
  auto t = cache.Start(prompt, true, false);
  ASSERT_TRUE(t.ok());
  const size_t before = t->state().MemoryBytes();
  Read(*t, prompt, {0, 50, 200}, options, 1);
  // The last message and one before the end; no periodic ones.
  EXPECT_EQ(t->state().SnapshotPositions(), (std::vector<int64_t>{200, 299}));
  EXPECT_GE(t->state().MemoryBytes(), before + 2 * runner_->layout()->recurrent_bytes());
  cache.Abandon(std::move(t).value());
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  std::replace(s.begin(), s.end(), ':', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(Models, PromptCacheTest,
                         ::testing::Values("tiny-llama", "tiny-qwen2-bf16",
                                           "tiny-hybrid-nemotron_h", "tiny-gemma3"),
                         CaseName);

// Reuse, copies, snapshots and shifts under quantized KV rows: every cached
// reply still equals a fresh read of the same type.
INSTANTIATE_TEST_SUITE_P(KvTypes, PromptCacheTest,
                         ::testing::Values("tiny-llama:q8_0", "tiny-llama:q4_0",
                                           "tiny-hybrid-nemotron_h:q8_0"),
                         CaseName);

}  // namespace
}  // namespace mx::engine
