// The timing side channel of a shared prompt cache, audited as the
// published prompt-stealing attacks measure it (many probes, a two-sample
// test on the time to the first token): tenant A caches chats; tenant B
// probes with A's prompts and with prompts nobody sent. Shared (`all`),
// A's prompts come back measurably faster, which shows the test can see a
// leak; isolated (`tenant`), the two samples are indistinguishable and B is
// told nothing was reused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/scheduler.h"
#include "models/synthetic_model.h"

namespace mx::engine {
namespace {

// Two-sided p-value of the Mann-Whitney U test (normal approximation with
// the tie correction), for samples of a few dozen.
double MannWhitneyP(const std::vector<double>& x, const std::vector<double>& y) {
  struct Obs {
    double v;
    int group;
  };
  std::vector<Obs> all;
  for (double v : x) all.push_back({v, 0});
  for (double v : y) all.push_back({v, 1});
  std::sort(all.begin(), all.end(), [](const Obs& a, const Obs& b) { return a.v < b.v; });
  const double n1 = static_cast<double>(x.size()), n2 = static_cast<double>(y.size()), n = n1 + n2;
  double rank_sum = 0, tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].v == all[i].v) ++j;
    const double rank = (static_cast<double>(i + j) + 1.0) / 2.0;  // average of ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      if (all[k].group == 0) rank_sum += rank;
    }
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double u = rank_sum - n1 * (n1 + 1) / 2;
  const double mean = n1 * n2 / 2;
  const double var = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  const double z = (u - mean) / std::sqrt(var);
  return std::erfc(std::fabs(z) / std::sqrt(2.0));
}

class TenantTimingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(::testing::TempDir() + "/tenant_timing_" + std::to_string(getpid()) +
                            ".gguf");
    // Wide enough that reading a prompt takes tens of milliseconds.
    models::SyntheticSpec spec;
    spec.n_layer = 8, spec.n_embd = 256, spec.n_head = 8, spec.n_kv_head = 4, spec.n_ff = 1024;
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

  struct Probe {
    double ttft_ms = 0;
    int64_t cached = 0;
  };
  // One greedy token for `tenant`; the time from Submit to the first event.
  static Probe Ask(Scheduler& s, const std::vector<int32_t>& prompt, const std::string& tenant,
                   bool isolated) {
    GenRequest r;
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.max_tokens = 1;
    r.ignore_eos = true;
    r.tenant = tenant;
    r.tenant_isolated = isolated;
    const uint64_t t0 = Env::Default()->NowMicros();
    auto stream = s.Submit(std::move(r));
    GenEvent ev;
    Probe p;
    bool first = true;
    while (stream->Next(&ev)) {
      if (first) p.ttft_ms = static_cast<double>(Env::Default()->NowMicros() - t0) / 1000.0;
      first = false;
      if (ev.final) {
        EXPECT_TRUE(ev.status.ok()) << ev.status.ToString();
        p.cached = ev.cached_tokens;
      }
    }
    return p;
  }

  // A caches kProbes chats; B then probes each of them and as many prompts
  // nobody sent, in a shuffled order. Returns the p-value of "A's prompts
  // and the unseen ones take the same time for B"; *b_cached: the most
  // cached_tokens B was told for A's prompts.
  static double Audit(bool isolated, int64_t* b_cached) {
    constexpr int kProbes = 40;
    constexpr int kLen = 400;
    // Room for every chat of the audit: nothing is evicted.
    auto s = Scheduler::Create(*model_,
                               {.n_threads = 1,
                                .n_ctx = 512,
                                .n_parallel = 1,
                                .model_name = "audit",
                                .cache = {.slots = 256, .budget_bytes = uint64_t{2} << 30}},
                               Env::Default());
    EXPECT_TRUE(s.ok());
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> tok(
        300, static_cast<int32_t>(model_->tokenizer->n_vocab()) - 1);
    // Each prompt starts with its own token, so no two share a start by
    // chance: whatever B reuses of A's prompts is A's.
    int32_t first = 10;
    auto random_prompt = [&] {
      std::vector<int32_t> p(kLen);
      for (int32_t& t : p) t = tok(rng);
      p[0] = first++;
      return p;
    };
    std::vector<std::vector<int32_t>> victim, unseen;
    for (int i = 0; i < kProbes; ++i) victim.push_back(random_prompt());
    for (int i = 0; i < kProbes; ++i) unseen.push_back(random_prompt());
    for (const auto& p : victim) Ask(**s, p, "a", isolated);
    // Warm-up probes (first requests pay for allocations), not counted.
    for (int i = 0; i < 3; ++i) Ask(**s, random_prompt(), "b", isolated);
    std::vector<std::pair<int, int>> order;  // (0 victim | 1 unseen, index)
    for (int i = 0; i < kProbes; ++i) order.push_back({0, i}), order.push_back({1, i});
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<double> t_victim, t_unseen;
    *b_cached = 0;
    for (const auto& [which, i] : order) {
      const Probe p =
          Ask(**s, which == 0 ? victim[static_cast<size_t>(i)] : unseen[static_cast<size_t>(i)],
              "b", isolated);
      (which == 0 ? t_victim : t_unseen).push_back(p.ttft_ms);
      if (which == 0) *b_cached = std::max(*b_cached, p.cached);
    }
    return MannWhitneyP(t_victim, t_unseen);
  }

  static std::string* path_;
  static LoadedModel* model_;
};
std::string* TenantTimingTest::path_ = nullptr;
LoadedModel* TenantTimingTest::model_ = nullptr;

TEST(MannWhitneyTest, SeesAShiftAndNotItsAbsence) {
  std::mt19937 rng(7);
  std::normal_distribution<double> d(10, 1);
  std::vector<double> a, b, c;
  for (int i = 0; i < 40; ++i) a.push_back(d(rng)), b.push_back(d(rng)), c.push_back(d(rng) + 2);
  EXPECT_GT(MannWhitneyP(a, b), 0.01);
  EXPECT_LT(MannWhitneyP(a, c), 1e-6);
}

// Shared: B reads A's chats from the cache (told so, and faster).
TEST_F(TenantTimingTest, SharedCacheLeaksAndTheAuditSeesIt) {
  int64_t cached = 0;
  const double p = Audit(/*isolated=*/false, &cached);
  RecordProperty("p_value", std::to_string(p));
  EXPECT_GT(cached, 300);
  EXPECT_LT(p, 1e-6) << "the audit cannot tell a cached prompt from a cold one";
}

// Isolated: nothing of A's is reused for B, and B's probes of A's prompts
// are as slow as cold reads.
TEST_F(TenantTimingTest, IsolatedTenantsLeakNothingTheAuditCanSee) {
  int64_t cached = 0;
  const double p = Audit(/*isolated=*/true, &cached);
  RecordProperty("p_value", std::to_string(p));
  EXPECT_EQ(cached, 0);
  EXPECT_GT(p, 1e-3) << "B's probes of A's prompts differ in time from cold reads";
}

}  // namespace
}  // namespace mx::engine
