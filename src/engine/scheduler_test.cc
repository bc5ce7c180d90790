#include "engine/scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "models/synthetic_model.h"

namespace mx::engine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(std::string(::testing::TempDir()) + "/scheduler_test_model_" +
                            std::to_string(getpid()) + ".gguf");
    models::SyntheticSpec spec;
    ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, *path_).ok());
    auto lm = LoadedModel::Load(Env::Default(), *path_, {});
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    model_ = std::move(lm).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    std::remove(path_->c_str());
    delete path_;
  }

  static std::unique_ptr<Scheduler> Make(int parallel, int64_t chunk = 256) {
    auto s = Scheduler::Create(*model_,
                               {.n_threads = 1,
                                .n_ctx = 512,
                                .n_parallel = parallel,
                                .prompt_chunk = chunk,
                                .model_name = "test",
                                .cache = {}},
                               Env::Default());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }

  static GenRequest Greedy(const std::string& text, int64_t max_tokens) {
    GenRequest r;
    r.prompt = model_->tokenizer->Encode(text, true, true);
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    return r;
  }

  struct Reply {
    std::vector<int32_t> tokens;
    std::string text;
    GenEvent last;
  };
  // Everything a request was charged. Each part is an interval the compute
  // loop measured between the request's Submit and the stamp on its final
  // event, and no two overlap, so the sum never exceeds that span.
  static double ChargedMs(const RequestTimings& t) {
    return t.queue_ms + t.cache_ms + t.prompt_ms + t.predicted_ms;
  }
  static double SpanMs(uint64_t from_us, uint64_t to_us) {
    return to_us > from_us ? static_cast<double>(to_us - from_us) / 1000.0 : 0.0;
  }
  // The parts are rounded to microseconds apiece.
  static constexpr double kRoundingMs = 0.01;
  static Reply Collect(GenStream& stream) {
    Reply r;
    GenEvent ev;
    while (stream.Next(&ev)) {
      if (ev.has_token) r.tokens.push_back(ev.token);
      r.text += ev.text;
      if (ev.final) r.last = ev;
    }
    return r;
  }

  // One reply per choice, in choice order.
  static std::vector<Reply> CollectChoices(GenStream& stream, int n) {
    std::vector<SchedulerTest::Reply> out(static_cast<size_t>(n));
    GenEvent ev;
    while (stream.Next(&ev)) {
      EXPECT_GE(ev.choice, 0);
      EXPECT_LT(ev.choice, n);
      if (ev.choice < 0 || ev.choice >= n) continue;
      auto& r = out[static_cast<size_t>(ev.choice)];
      EXPECT_FALSE(r.last.final) << "an event after choice " << ev.choice << "'s final one";
      if (ev.has_token) r.tokens.push_back(ev.token);
      r.text += ev.text;
      if (ev.final) r.last = ev;
    }
    return out;
  }

  static std::string* path_;
  static LoadedModel* model_;
};
std::string* SchedulerTest::path_ = nullptr;
LoadedModel* SchedulerTest::model_ = nullptr;

TEST_F(SchedulerTest, MaxTokensEndsWithLength) {
  auto s = Make(2);
  GenRequest req = Greedy("hello there", 5);
  req.ignore_eos = true;  // the reply cannot end early, whatever the model prefers
  Reply r = Collect(*s->Submit(req));
  ASSERT_TRUE(r.last.status.ok()) << r.last.status.ToString();
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(r.last.finish_reason, "length");
  EXPECT_EQ(r.last.completion_tokens, 5);
  EXPECT_EQ(r.last.cached_tokens, 0);
}

TEST_F(SchedulerTest, ConcurrentGreedyRepliesEqualSoloReplies) {
  std::vector<std::string> prompts = {
      "one", "two words", "a longer prompt with more tokens", "x", "the quick brown fox", "jumps"};
  std::vector<Reply> solo;
  {
    auto s = Make(1);
    for (auto& p : prompts) solo.push_back(Collect(*s->Submit(Greedy(p, 12))));
  }
  auto s = Make(4, 7);  // small chunks: prompts are read across several steps
  std::vector<std::shared_ptr<GenStream>> streams;
  for (auto& p : prompts) streams.push_back(s->Submit(Greedy(p, 12)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    Reply r = Collect(*streams[i]);
    EXPECT_EQ(r.tokens, solo[i].tokens) << prompts[i];
    EXPECT_EQ(r.text, solo[i].text) << prompts[i];
  }
}

TEST_F(SchedulerTest, CancelFreesTheSlot) {
  auto s = Make(1);
  auto a = s->Submit(Greedy("cancel me", 400));
  GenEvent ev;
  ASSERT_TRUE(a->Next(&ev));
  a->Cancel();
  Reply ra = Collect(*a);
  Reply rb = Collect(*s->Submit(Greedy("next", 3)));
  EXPECT_TRUE(rb.last.status.ok());
  EXPECT_TRUE(rb.last.final);
}

TEST_F(SchedulerTest, PromptLongerThanContextIsRejected) {
  auto s = Make(1);
  GenRequest r;
  r.prompt.assign(600, 1);
  Reply rep = Collect(*s->Submit(r));
  EXPECT_EQ(rep.last.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(rep.last.status.message().find("600"), std::string::npos);
  EXPECT_NE(rep.last.status.message().find("512"), std::string::npos);
}

TEST_F(SchedulerTest, LogprobsAreReported) {
  auto s = Make(1);
  GenRequest r = Greedy("hi", 3);
  r.logprobs = true;
  r.top_logprobs = 3;
  r.ignore_eos = true;  // so the first event is a token, not an early end
  auto st = s->Submit(r);
  GenEvent ev;
  ASSERT_TRUE(st->Next(&ev));
  ASSERT_TRUE(ev.has_token);
  EXPECT_LE(ev.logprob, 0.0f);
  ASSERT_EQ(ev.top.size(), 3u);
  EXPECT_EQ(ev.top[0].first, ev.token);  // greedy picks the best
  EXPECT_FLOAT_EQ(ev.top[0].second, ev.logprob);
  EXPECT_GE(ev.top[0].second, ev.top[1].second);
  EXPECT_GE(ev.top[1].second, ev.top[2].second);
  Collect(*st);
}

TEST_F(SchedulerTest, FinalEventTellsWhereTheTimeWent) {
  auto s = Make(1);
  GenRequest req = Greedy("where did the time go", 6);
  req.ignore_eos = true;
  const uint64_t submit_us = Env::Default()->NowMicros();
  Reply r = Collect(*s->Submit(req));
  ASSERT_TRUE(r.last.status.ok()) << r.last.status.ToString();
  const RequestTimings& t = r.last.timings;
  EXPECT_GT(t.prompt_ms, 0.0);
  EXPECT_GT(t.predicted_ms, 0.0);
  EXPECT_LE(ChargedMs(t), SpanMs(submit_us, r.last.time_us) + kRoundingMs)
      << "queue " << t.queue_ms << " cache " << t.cache_ms << " prompt " << t.prompt_ms
      << " predicted " << t.predicted_ms;
  EXPECT_EQ(r.last.completion_tokens, 6);
}

TEST_F(SchedulerTest, NextTurnChargesTheCacheNotThePromptForReusedTokens) {
  auto s = Make(1);
  GenRequest first = Greedy("a chat that the pool keeps for its next turn", 4);
  first.ignore_eos = true;
  Reply r1 = Collect(*s->Submit(first));
  ASSERT_TRUE(r1.last.status.ok());
  ASSERT_EQ(r1.tokens.size(), 4u);
  GenRequest second = first;
  second.prompt.insert(second.prompt.end(), r1.tokens.begin(), r1.tokens.end());
  const std::vector<int32_t> more =
      model_->tokenizer->Encode(" and one more question", false, false);
  second.prompt.insert(second.prompt.end(), more.begin(), more.end());
  const uint64_t submit_us = Env::Default()->NowMicros();
  Reply r2 = Collect(*s->Submit(second));
  ASSERT_TRUE(r2.last.status.ok());
  // The pool kept the first prompt and the reply's tokens but the last (a
  // sampled token is never read): those are reused, the rest is read.
  EXPECT_EQ(r2.last.cached_tokens, static_cast<int64_t>(first.prompt.size()) + 3);
  EXPECT_GT(r2.last.timings.prompt_ms, 0.0);  // the new tokens were read
  EXPECT_LE(ChargedMs(r2.last.timings), SpanMs(submit_us, r2.last.time_us) + kRoundingMs);
}

TEST_F(SchedulerTest, EachRequestPushesItsCacheLineToTheEventLog) {
  CacheEventLog events;
  auto s = Scheduler::Create(
      *model_, {.n_threads = 1, .n_ctx = 512, .model_name = "test", .cache = {}, .events = &events},
      Env::Default());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  GenRequest first = Greedy("a chat about the status page", 3);
  first.tenant = "acme";
  Reply r1 = Collect(*(*s)->Submit(first));
  GenRequest second = first;
  second.prompt.insert(second.prompt.end(), r1.tokens.begin(), r1.tokens.end());
  second.prompt.push_back(first.prompt.back());
  Reply r2 = Collect(*(*s)->Submit(second));
  GenRequest off = first;
  off.cache_prompt = false;
  Collect(*(*s)->Submit(off));
  ASSERT_GT(r2.last.cached_tokens, 0);

  CacheEventPage page = events.Since(0, 10);
  ASSERT_EQ(page.events.size(), 3u);
  const CacheEvent& a = page.events[0];
  EXPECT_EQ(a.model, "test");
  EXPECT_EQ(a.tenant, "acme");
  EXPECT_EQ(a.prompt_tokens, static_cast<int64_t>(first.prompt.size()));
  EXPECT_EQ(a.cached_tokens, 0);
  EXPECT_EQ(a.source, CacheSource::kNone);
  EXPECT_EQ(a.line.rfind("re-reading the entire chat", 0), 0u) << a.line;
  EXPECT_GT(a.time_unix_ms, 0u);
  const CacheEvent& b = page.events[1];
  EXPECT_EQ(b.cached_tokens, r2.last.cached_tokens);
  EXPECT_EQ(b.source, CacheSource::kRam);
  EXPECT_EQ(b.line.rfind("reused " + std::to_string(b.cached_tokens) + " of ", 0), 0u) << b.line;
  EXPECT_NE(page.events[2].line.find("cache_prompt: false"), std::string::npos)
      << page.events[2].line;
  EXPECT_EQ(page.events[2].source, CacheSource::kNone);
}

// b waits for the only slot until a's reply ends (by its length or by the
// cancel below, whichever comes first): its queue_ms covers exactly that
// wait, bounded by the times the compute loop stamped on the events.
TEST_F(SchedulerTest, QueuedRequestCountsItsWait) {
  auto s = Make(1);
  GenRequest a = Greedy("the first request holds the only slot", 400);
  a.ignore_eos = true;
  auto sa = s->Submit(a);
  GenEvent first;
  ASSERT_TRUE(sa->Next(&first));  // a holds the slot and generates
  const uint64_t b_before_us = Env::Default()->NowMicros();
  auto sb = s->Submit(Greedy("the second waits", 2));
  const uint64_t b_queued_us = Env::Default()->NowMicros();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  sa->Cancel();
  Reply ra = Collect(*sa);
  GenEvent b_first;
  ASSERT_TRUE(sb->Next(&b_first));
  Reply rb = Collect(*sb);
  ASSERT_TRUE(rb.last.status.ok());
  ASSERT_TRUE(ra.last.status.ok());
  // a was still generating when b was queued, so b had a real wait.
  ASSERT_GT(ra.last.time_us, b_queued_us);
  const double waited_at_least_ms = static_cast<double>(ra.last.time_us - b_queued_us) / 1000.0;
  const double waited_at_most_ms = static_cast<double>(b_first.time_us - b_before_us) / 1000.0;
  EXPECT_GE(rb.last.timings.queue_ms, waited_at_least_ms);
  EXPECT_LE(rb.last.timings.queue_ms, waited_at_most_ms);
}

// Steps shared by two requests are split between them, not charged twice:
// everything charged on the compute loop fits in the time both took.
TEST_F(SchedulerTest, BatchedStepsAreSharedNotCountedTwice) {
  auto s = Make(2, 7);
  GenRequest a = Greedy("two requests read their prompts in the same steps", 12);
  GenRequest b = Greedy("and then decode side by side in one batch", 12);
  a.ignore_eos = b.ignore_eos = true;
  const uint64_t t0 = Env::Default()->NowMicros();
  auto sa = s->Submit(a);
  auto sb = s->Submit(b);
  Reply ra = Collect(*sa);
  Reply rb = Collect(*sb);
  ASSERT_TRUE(ra.last.status.ok());
  ASSERT_TRUE(rb.last.status.ok());
  // The compute loop's work for both lies between the first Submit and the
  // later of the two final stamps.
  const double span_ms = SpanMs(t0, std::max(ra.last.time_us, rb.last.time_us));
  double charged = 0;
  for (const RequestTimings* t : {&ra.last.timings, &rb.last.timings}) {
    EXPECT_GT(t->prompt_ms, 0.0);
    EXPECT_GT(t->predicted_ms, 0.0);
    charged += t->cache_ms + t->prompt_ms + t->predicted_ms;
  }
  EXPECT_LE(charged, span_ms + kRoundingMs);
}

}  // namespace
}  // namespace mx::engine

namespace mx::engine {
namespace {

// The hybrid reference model (ChatML, <|im_start|> a single token): each
// message's start is where the chat without that message (and the ones
// after it) ends, and the generation prompt's marker is not a message.
// ---- n > 1 choices, constraints ----

TEST_F(SchedulerTest, GreedyChoicesEqualTheSoloReplyAndReadThePromptOnce) {
  const Reply solo = Collect(*Make(1)->Submit(Greedy("several choices please", 10)));
  auto s = Make(2);
  GenRequest req = Greedy("several choices please", 10);
  req.n = 3;
  const auto before = s->prompt_cache().pool().counters();
  std::vector<Reply> got = CollectChoices(*s->Submit(req), 3);
  const auto after = s->prompt_cache().pool().counters();
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE("choice " + std::to_string(c));
    ASSERT_TRUE(got[c].last.final);
    ASSERT_TRUE(got[c].last.status.ok()) << got[c].last.status.ToString();
    EXPECT_EQ(got[c].tokens, solo.tokens);
    EXPECT_EQ(got[c].last.completion_tokens, static_cast<int64_t>(solo.tokens.size()));
  }
  // Choices 1 and 2 start from copies of the state choice 0 read: the pool
  // counts both as reusing the whole prompt; nothing else was reused.
  EXPECT_EQ(after.tokens_reused - before.tokens_reused, 2 * req.prompt.size());
  EXPECT_EQ(s->active(), 0);
}

TEST_F(SchedulerTest, SeededChoicesDifferAndReproduceFromTheCache) {
  auto s = Make(4);
  GenRequest req = Greedy("sampled choices", 12);
  req.sampling = SamplingParams();
  req.sampling.temperature = 1.5f;
  req.sampling.top_k = 0;
  req.sampling.top_p = 1.0f;
  req.sampling.min_p = 0.0f;
  req.sampling.seed = 42;
  req.ignore_eos = true;
  req.n = 3;
  std::vector<Reply> cold = CollectChoices(*s->Submit(req), 3);
  EXPECT_NE(cold[0].tokens, cold[1].tokens);
  EXPECT_NE(cold[1].tokens, cold[2].tokens);
  // The same request again continues from the cached prompt: same replies.
  std::vector<Reply> warm = CollectChoices(*s->Submit(req), 3);
  EXPECT_GT(warm[0].last.cached_tokens, 0);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(warm[c].tokens, cold[c].tokens) << "choice " << c;
  // Choice 0 of n = 3 is the reply of the same request with n = 1.
  req.n = 1;
  EXPECT_EQ(Collect(*s->Submit(req)).tokens, cold[0].tokens);
}

TEST_F(SchedulerTest, ChoicesOutOfRangeAreRefusedAndCancelEndsEveryChoice) {
  auto s = Make(1);
  GenRequest bad = Greedy("x", 3);
  bad.n = kMaxChoices + 1;
  Reply r = Collect(*s->Submit(bad));
  EXPECT_EQ(r.last.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.last.status.message().find("n must be in"), std::string::npos);

  auto busy = s->Submit(Greedy("keeps the only slot", 400));
  GenEvent ev;
  ASSERT_TRUE(busy->Next(&ev));
  GenRequest queued = Greedy("waits in the queue", 5);
  queued.n = 4;
  auto q = s->Submit(queued);
  q->Cancel();
  std::vector<Reply> ends = CollectChoices(*q, 4);
  for (const Reply& e : ends) EXPECT_EQ(e.last.finish_reason, "cancelled");
  busy->Cancel();
  Collect(*busy);
}

// Allows only tokens of a fixed set and ends after `limit` of them.
class AllowList : public TokenConstraint {
 public:
  AllowList(std::vector<int32_t> ids, int limit) : ids_(std::move(ids)), limit_(limit) {}
  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<AllowList>(*this);
  }
  bool Allows(int32_t t) override { return std::find(ids_.begin(), ids_.end(), t) != ids_.end(); }
  void Mask(std::span<float> logits) override {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!Allows(static_cast<int32_t>(i))) logits[i] = -INFINITY;
    }
  }
  void Accept(int32_t) override { ++accepted_; }
  bool MustEnd() const override { return accepted_ >= limit_; }

 private:
  std::vector<int32_t> ids_;
  int limit_;
  int accepted_ = 0;
};

TEST_F(SchedulerTest, ConstrainedRepliesKeepToTheConstraintAndEndWhenItIsDone) {
  auto s = Make(2);
  const std::vector<int32_t> allowed = {101, 202, 303};
  GenRequest req = Greedy("constrained", 50);
  req.constraint = std::make_shared<AllowList>(allowed, 6);
  req.n = 2;
  std::vector<Reply> got = CollectChoices(*s->Submit(req), 2);
  for (const Reply& r : got) {
    ASSERT_TRUE(r.last.status.ok()) << r.last.status.ToString();
    EXPECT_EQ(r.tokens.size(), 6u);  // each choice has its own clone of the prototype
    EXPECT_EQ(r.last.finish_reason, "stop");
    for (int32_t t : r.tokens)
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
  }
  // The prototype itself was never advanced: the same request gives the same reply.
  EXPECT_EQ(CollectChoices(*s->Submit(req), 2)[0].tokens, got[0].tokens);
}

TEST(LoadedModelTest, MessageStartsAreWhereEachMessageBegins) {
  auto lm = LoadedModel::Load(
      Env::Default(), std::string(MATRICXON_REF_DIR) + "/models/tiny-hybrid-nemotron_h.gguf", {});
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  const std::vector<templates::ChatMessage> chat = {{"system", "the notes", {}},
                                                    {"user", "a question", {}},
                                                    {"assistant", "an answer", {}},
                                                    {"user", "more", {}}};
  auto prompt = (*lm)->EncodeChat(chat, {});
  ASSERT_TRUE(prompt.ok());
  int64_t reply_start = -1;
  const std::vector<int64_t> starts = (*lm)->MessageStarts(*prompt, true, &reply_start);
  ASSERT_EQ(starts.size(), chat.size());
  {
    // The reply's message begins where the history of the whole chat ends.
    templates::RenderOptions history;
    history.add_generation_prompt = false;
    auto all = (*lm)->EncodeChat(chat, history);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(reply_start, static_cast<int64_t>(all->size()));
  }
  EXPECT_EQ(starts[0], 0);
  for (size_t k = 1; k < chat.size(); ++k) {
    std::vector<templates::ChatMessage> before(chat.begin(),
                                               chat.begin() + static_cast<std::ptrdiff_t>(k));
    templates::RenderOptions history;
    history.add_generation_prompt = false;
    auto head = (*lm)->EncodeChat(before, history);
    ASSERT_TRUE(head.ok());
    EXPECT_EQ(starts[k], static_cast<int64_t>(head->size())) << "message " << k;
  }
  // Text completions (no generation prompt to leave out) keep every marker.
  EXPECT_EQ((*lm)->MessageStarts(*prompt, /*generation_prompt=*/false).size(), chat.size() + 1);
}

}  // namespace
}  // namespace mx::engine

namespace mx::engine {
namespace {

// System, user, reply, new user message: leaving the cached chat in the
// reply is a chat going on; inside the first user message, an earlier
// message changed.
TEST(DivergenceNoteTest, NamesAnEarlierMessageThatChanged) {
  const std::vector<int64_t> starts = {0, 10, 30, 50};
  EXPECT_EQ(DivergenceNote(starts, 35), "");  // in the last reply
  EXPECT_EQ(DivergenceNote(starts, 55), "");  // in the new message
  EXPECT_EQ(DivergenceNote(starts, 0), "");
  EXPECT_EQ(DivergenceNote({}, 15), "");
  EXPECT_EQ(DivergenceNote(starts, 15),
            "; the prompt left the cached chat at token 15, inside message 2 of 4 (an earlier "
            "message changed: edited by the client, or rewritten by the chat template)");
}

}  // namespace
}  // namespace mx::engine
