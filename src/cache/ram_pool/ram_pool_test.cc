#include "cache/ram_pool/ram_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

namespace mx::cache {
namespace {

// A stand-in state: it "holds" the tokens it was given, 100 bytes each.
struct FakeState {
  std::vector<int32_t> content;
};
struct FakeTraits {
  static size_t Bytes(const FakeState& s) { return s.content.size() * 100; }
  static Result<std::unique_ptr<FakeState>> CopyPrefix(const FakeState& s, int64_t n) {
    auto c = std::make_unique<FakeState>();
    c->content.assign(s.content.begin(), s.content.begin() + n);
    return c;
  }
  static std::vector<int64_t> CutPoints(const FakeState&) { return {}; }
  static int64_t NewestCut(const FakeState&, int64_t n) { return n; }
  static Status RemoveSpan(FakeState& s, int64_t begin, int64_t end) {
    s.content.erase(s.content.begin() + begin, s.content.begin() + end);
    return Status::Ok();
  }
  static Status Truncate(FakeState& s, int64_t n) {
    s.content.resize(static_cast<size_t>(n));
    return Status::Ok();
  }
};
using Pool = RamPool<FakeState, FakeTraits>;

std::vector<int32_t> Seq(int32_t from, int32_t to) {
  std::vector<int32_t> v;
  for (int32_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

class RamPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<Pool> MakePool(size_t slots, size_t budget) {
    RamPoolOptions o;
    o.limits = {slots, budget};
    return std::make_unique<Pool>(
        o, [] { return std::make_unique<FakeState>(); }, [this] { return ++now_; },
        [this](Pool::Leaving leaving) { evicted_.push_back(leaving.tokens); });
  }
  // Simulates a request: acquire, "read" the rest of the prompt, commit.
  // `held` (default: the prompt) is what the state holds afterwards: the
  // prompt followed by its reply.
  LookupPlan Serve(Pool& pool, const std::vector<int32_t>& prompt, std::vector<int32_t> held = {},
                   const LookupScope& scope = {}) {
    if (held.empty()) held = prompt;
    auto lease = pool.Acquire(prompt, scope);
    EXPECT_TRUE(lease.ok());
    LookupPlan plan = lease->plan();
    FakeState& s = lease->state();
    EXPECT_EQ(s.content, std::vector<int32_t>(prompt.begin(), prompt.begin() + lease->n_reused()));
    s.content = held;
    lease->Commit(held, static_cast<int64_t>(prompt.size()));
    return plan;
  }
  uint64_t now_ = 0;
  std::vector<std::vector<int32_t>> evicted_;
};

TEST_F(RamPoolTest, NextTurnContinuesTheSameEntry) {
  auto pool = MakePool(4, 1 << 20);
  LookupPlan first = Serve(*pool, Seq(0, 10));
  EXPECT_EQ(first.kind, ReuseKind::kNone);
  EXPECT_EQ(first.why_none, "RAM holds no conversations");
  LookupPlan second = Serve(*pool, Seq(0, 25));
  EXPECT_EQ(second.kind, ReuseKind::kInPlace);
  EXPECT_EQ(second.n_reuse, 10);
  ASSERT_EQ(pool->Stats().size(), 1u);
  EXPECT_EQ(pool->Stats()[0].n_tokens, 25);
  EXPECT_EQ(pool->Stats()[0].bytes, 2500u);
}

TEST_F(RamPoolTest, SharedStartIsCopiedAndTheOriginalStaysIntact) {
  auto pool = MakePool(4, 1 << 20);
  Serve(*pool, Seq(0, 100));
  auto other = Seq(0, 20);
  other.push_back(-5);
  LookupPlan p = Serve(*pool, other);
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 20);
  auto stats = pool->Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].n_tokens, 100);
  EXPECT_EQ(stats[1].n_tokens, 21);
  // The first chat continues in place without re-reading.
  EXPECT_EQ(Serve(*pool, Seq(0, 110)).n_reuse, 100);
  EXPECT_EQ(pool->counters().copies, 1u);
}

TEST_F(RamPoolTest, RegeneratedReplyReusesThePrompt) {
  auto pool = MakePool(4, 1 << 20);
  auto prompt = Seq(0, 50);
  auto with_reply = Seq(0, 60);
  Serve(*pool, prompt, with_reply);     // the prompt, then the 10-token reply it produced
  LookupPlan p = Serve(*pool, prompt);  // regenerate: the same prompt again
  EXPECT_EQ(p.kind, ReuseKind::kTruncateInPlace);
  EXPECT_EQ(p.n_reuse, 49);
  EXPECT_EQ(pool->Stats().size(), 1u);
}

TEST_F(RamPoolTest, TrimmedChatIsShiftedInPlace) {
  auto pool = MakePool(4, 1 << 20);
  std::vector<int32_t> chat = Seq(0, 10);  // system
  auto old_turn = Seq(100, 140), rest = Seq(200, 300);
  chat.insert(chat.end(), old_turn.begin(), old_turn.end());
  chat.insert(chat.end(), rest.begin(), rest.end());
  Serve(*pool, chat);
  std::vector<int32_t> trimmed = Seq(0, 10);
  trimmed.insert(trimmed.end(), rest.begin(), rest.end());
  trimmed.push_back(-3);
  LookupPlan p = Serve(*pool, trimmed);  // Serve checks the state holds trimmed[0, n_reused)
  EXPECT_EQ(p.kind, ReuseKind::kShiftInPlace);
  EXPECT_EQ(p.n_reuse, 110);
  EXPECT_EQ(pool->Stats().size(), 1u);
  EXPECT_EQ(pool->counters().shifts, 1u);
}

TEST_F(RamPoolTest, BusyEntryGivesACopyAndIsNeverWrittenByTwo) {
  auto pool = MakePool(4, 1 << 20);
  Serve(*pool, Seq(0, 30));
  auto first = pool->Acquire(Seq(0, 40));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->plan().kind, ReuseKind::kInPlace);
  auto second = pool->Acquire(Seq(0, 45));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->plan().kind, ReuseKind::kCopyPrefix);
  EXPECT_NE(first->entry_id(), second->entry_id());
  EXPECT_NE(&first->state(), &second->state());
  first->state().content = Seq(0, 40);
  first->Commit(Seq(0, 40), 40);
  second->state().content = Seq(0, 45);
  second->Commit(Seq(0, 45), 45);
  EXPECT_EQ(pool->Stats().size(), 2u);
}

TEST_F(RamPoolTest, SlotLimitEvictsLeastRecentlyUsedThroughTheHook) {
  auto pool = MakePool(2, 1 << 20);
  Serve(*pool, Seq(0, 10));
  Serve(*pool, Seq(100, 110));
  Serve(*pool, Seq(0, 12));      // touches the first chat
  Serve(*pool, Seq(200, 210));   // third chat: the second leaves
  ASSERT_EQ(evicted_.size(), 1u);
  EXPECT_EQ(evicted_[0], Seq(100, 110));
  EXPECT_EQ(pool->counters().evictions, 1u);
  EXPECT_EQ(pool->Stats().size(), 2u);
}

TEST_F(RamPoolTest, BudgetEvictsButAChatLargerThanTheBudgetKeepsItsCache) {
  auto pool = MakePool(8, 3000);  // 30 tokens' worth
  Serve(*pool, Seq(0, 20));
  Serve(*pool, Seq(100, 150));  // 5000 bytes alone: the first leaves, this one stays
  EXPECT_EQ(evicted_.size(), 1u);
  ASSERT_EQ(pool->Stats().size(), 1u);
  EXPECT_EQ(Serve(*pool, Seq(100, 160)).n_reuse, 50);
}

TEST_F(RamPoolTest, EntryInUseIsNeverEvicted) {
  auto pool = MakePool(1, 1 << 20);
  auto held = pool->Acquire(Seq(0, 10));
  ASSERT_TRUE(held.ok());
  Serve(*pool, Seq(50, 60));  // over the slot limit, but the held entry must stay
  bool found_held = false;
  for (const auto& s : pool->Stats()) found_held |= s.id == held->entry_id();
  EXPECT_TRUE(found_held);
  held->Commit({}, 0);
}

TEST_F(RamPoolTest, AbandonedLeaseDropsItsEntry) {
  auto pool = MakePool(4, 1 << 20);
  Serve(*pool, Seq(0, 10));
  {
    auto lease = pool->Acquire(Seq(0, 20));
    ASSERT_TRUE(lease.ok());
    lease->state().content.push_back(77);  // half-written, then the request fails
  }
  EXPECT_TRUE(pool->Stats().empty());
  EXPECT_EQ(Serve(*pool, Seq(0, 20)).kind, ReuseKind::kNone);
}

TEST_F(RamPoolTest, FlushHandsEveryIdleEntryToTheHook) {
  auto pool = MakePool(4, 1 << 20);
  Serve(*pool, Seq(0, 10));
  Serve(*pool, Seq(100, 110));
  auto held = pool->Acquire(Seq(200, 210));
  pool->Flush();
  EXPECT_EQ(evicted_.size(), 2u);
  EXPECT_EQ(pool->Stats().size(), 1u);
}

// An entry in use grows while its request runs: Recharge counts that at
// once (not only when the request ends) and makes room by evicting the
// least recently used idle entry.
TEST_F(RamPoolTest, RechargeCountsGrowthOfEntriesInUse) {
  auto pool = MakePool(4, 5000);  // 50 tokens' worth
  Serve(*pool, Seq(0, 20));
  Serve(*pool, Seq(100, 120));
  auto lease = pool->Acquire(Seq(200, 205));
  ASSERT_TRUE(lease.ok());
  lease->state().content = Seq(200, 210);  // 1000 bytes: still fits
  pool->Recharge();
  EXPECT_TRUE(evicted_.empty());
  EXPECT_EQ(pool->total_bytes(), 5000u);
  lease->state().content = Seq(200, 230);  // 3000 bytes: the oldest idle entry must go
  pool->Recharge();
  ASSERT_EQ(evicted_.size(), 1u);
  EXPECT_EQ(evicted_[0], Seq(0, 20));
  EXPECT_EQ(pool->total_bytes(), 2000u + 3000u);
  lease->Commit(Seq(200, 230), 5);
}

// A recurrent stand-in: it can be cut or copied only at its end and at its
// snapshots, which change while a request uses it (new ones push the oldest
// out). `reported` (when set) is what it tells the planner instead: a list
// that promises cuts the state no longer has, as a stale copy would.
struct SnapState {
  std::vector<int32_t> content;
  std::vector<int64_t> snapshots;
  std::optional<std::vector<int64_t>> reported;
  bool CanCut(int64_t n) const {
    return n == static_cast<int64_t>(content.size()) || n == 0 ||
           std::find(snapshots.begin(), snapshots.end(), n) != snapshots.end();
  }
};
struct SnapTraits {
  static size_t Bytes(const SnapState& s) { return s.content.size(); }
  static Result<std::unique_ptr<SnapState>> CopyPrefix(const SnapState& s, int64_t n) {
    if (!s.CanCut(n)) return Status::InvalidArgument("no snapshot at " + std::to_string(n));
    auto c = std::make_unique<SnapState>();
    c->content.assign(s.content.begin(), s.content.begin() + n);
    for (int64_t p : s.snapshots) {
      if (p <= n) c->snapshots.push_back(p);
    }
    return c;
  }
  static std::vector<int64_t> CutPoints(const SnapState& s) {
    return s.reported ? *s.reported : s.snapshots;
  }
  static int64_t NewestCut(const SnapState& s, int64_t n) {
    if (n >= static_cast<int64_t>(s.content.size())) return static_cast<int64_t>(s.content.size());
    int64_t cut = 0;
    for (int64_t p : s.snapshots) {
      if (p <= n) cut = std::max(cut, p);
    }
    return cut;
  }
  static Status RemoveSpan(SnapState&, int64_t, int64_t) { return Status::NotSupported("recurrent"); }
  static Status Truncate(SnapState& s, int64_t n) {
    if (!s.CanCut(n)) return Status::InvalidArgument("no snapshot at " + std::to_string(n));
    s.content.resize(static_cast<size_t>(n));
    std::erase_if(s.snapshots, [n](int64_t p) { return p > n; });
    return Status::Ok();
  }
};
using SnapPool = RamPool<SnapState, SnapTraits>;

SnapPool::Lease MustAcquire(SnapPool& pool, const std::vector<int32_t>& prompt) {
  auto lease = pool.Acquire(prompt);
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
  return lease.ok() ? std::move(lease).value() : SnapPool::Lease();
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Chat X continues in place and its new snapshots push out the one chat Y
// would copy: Y plans from X's snapshots as they are now (no cut within the
// shared start: a fresh state), never fails because of what X did.
TEST(RamPoolRecurrentTest, PlansFromTheSnapshotsAnEntryInUseHasNow) {
  RamPoolOptions o;
  o.limits = {4, 1 << 20};
  o.lookup.recurrent = true;
  uint64_t now = 0;
  SnapPool pool(o, [] { return std::make_unique<SnapState>(); }, [&] { return ++now; });
  std::vector<int32_t> x = Seq(0, 40);
  auto first = pool.Acquire(x);
  ASSERT_TRUE(first.ok());
  first->state().content = x;
  first->state().snapshots = {8, 16, 32};
  first->Commit(x, 40);
  std::vector<int32_t> x_next = Seq(0, 80);  // X's next turn, in place
  auto lx = pool.Acquire(x_next);
  ASSERT_TRUE(lx.ok());
  EXPECT_EQ(lx->n_reused(), 40);
  lx->state().snapshots = {32, 48, 64};  // reading on: 8 and 16 pushed out
  std::vector<int32_t> y = Seq(0, 20);
  y.push_back(-1);
  y.push_back(-2);
  EXPECT_EQ(pool.Peek(y).n_reuse, 0);
  auto ly = pool.Acquire(y);
  ASSERT_TRUE(ly.ok()) << ly.status().ToString();
  EXPECT_EQ(ly->n_reused(), 0);
  EXPECT_TRUE(ly->state().content.empty());
  // With a snapshot that is still there, Y copies it.
  std::vector<int32_t> z = Seq(0, 35);
  z.push_back(-3);
  auto lz = pool.Acquire(z);
  ASSERT_TRUE(lz.ok());
  EXPECT_EQ(lz->n_reused(), 32);
  EXPECT_EQ(lz->state().content, Seq(0, 32));
}

class RamPoolApplyTest : public ::testing::Test {
 protected:
  RamPoolApplyTest()
      : pool_(
            Options(), [] { return std::make_unique<SnapState>(); }, [this] { return ++now_; }) {}
  static RamPoolOptions Options() {
    RamPoolOptions o;
    o.limits = {4, 1 << 20};
    o.lookup.recurrent = true;
    return o;
  }
  // A finished chat of 40 prompt tokens and a 10-token reply, with
  // snapshots at `snapshots`, whose state then reports `reported` instead.
  void Chat(std::vector<int64_t> snapshots, std::vector<int64_t> reported) {
    SnapPool::Lease l = MustAcquire(pool_, chat_prompt_);
    l.state().content = chat_;
    l.state().snapshots = std::move(snapshots);
    l.state().reported = std::move(reported);
    state_ = &l.state();
    l.Commit(chat_, 40);
  }
  uint64_t now_ = 0;
  SnapPool pool_;
  std::vector<int32_t> chat_prompt_ = Seq(0, 40);
  std::vector<int32_t> chat_ = Seq(0, 50);
  SnapState* state_ = nullptr;
};

// The plan is checked against the state when it is applied: a copy of a
// shared start whose planned snapshot is not really there is made at the
// newest cut the state has at or before it, never refused.
TEST_F(RamPoolApplyTest, CopyFallsBackToTheNewestRealCut) {
  Chat({8, 16}, {8, 16, 32});
  const std::vector<int32_t> other = Concat(Seq(0, 35), {-1, -2});  // shares 35 tokens
  EXPECT_EQ(pool_.Peek(other).n_reuse, 32);  // the plan, from what the state reports
  SnapPool::Lease l = MustAcquire(pool_, other);
  EXPECT_EQ(l.plan().kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(l.n_reused(), 16);
  EXPECT_EQ(l.state().content, Seq(0, 16));
  EXPECT_EQ(state_->content, chat_);  // the original stays whole
  l.Commit(other, 37);
}

// No real cut within the shared start: the request starts fresh (and says
// why), and the entry it planned to copy stays whole.
TEST_F(RamPoolApplyTest, CopyWithoutARealCutStartsFresh) {
  Chat({}, {32});
  SnapPool::Lease l = MustAcquire(pool_, Concat(Seq(0, 35), {-1}));
  EXPECT_EQ(l.plan().kind, ReuseKind::kNone);
  EXPECT_EQ(l.n_reused(), 0);
  EXPECT_TRUE(l.state().content.empty());
  EXPECT_NE(l.plan().why_none.find("the shared start could not be copied"), std::string::npos)
      << l.plan().why_none;
  EXPECT_EQ(state_->content, chat_);
  l.Commit({-1}, 1);
}

// A regenerated reply cuts the chat in place at the newest real cut at or
// before the planned one.
TEST_F(RamPoolApplyTest, TruncateInPlaceFallsBackToTheNewestRealCut) {
  Chat({16}, {16, 39});
  EXPECT_EQ(pool_.Peek(chat_prompt_).n_reuse, 39);
  SnapPool::Lease l = MustAcquire(pool_, chat_prompt_);
  EXPECT_EQ(l.plan().kind, ReuseKind::kTruncateInPlace);
  EXPECT_EQ(l.n_reused(), 16);
  EXPECT_EQ(&l.state(), state_);  // the same entry, cut
  EXPECT_EQ(l.state().content, Seq(0, 16));
  l.Commit(chat_prompt_, 40);
}

// ... and when the state has none, the chat's entry is left whole and the
// request starts fresh instead of failing.
TEST_F(RamPoolApplyTest, TruncateInPlaceWithoutARealCutStartsFresh) {
  Chat({}, {39});
  SnapPool::Lease l = MustAcquire(pool_, chat_prompt_);
  EXPECT_EQ(l.plan().kind, ReuseKind::kNone);
  EXPECT_NE(&l.state(), state_);
  EXPECT_NE(l.plan().why_none.find("the cached chat could not be cut"), std::string::npos)
      << l.plan().why_none;
  EXPECT_EQ(state_->content, chat_);
  l.Commit(chat_prompt_, 40);
  EXPECT_EQ(pool_.Stats().size(), 2u);
}

// Isolated lookups see only their tenant's entries: B's first request of
// A's chat reuses nothing and says RAM holds none; A continues its own; a
// shared lookup (the default) still continues anyone's. The entry belongs
// to whoever used it last.
TEST_F(RamPoolTest, IsolatedTenantsSeeOnlyTheirOwnEntries) {
  auto pool = MakePool(4, 1 << 20);
  const LookupScope a{"a", true}, b{"b", true};
  Serve(*pool, Seq(0, 20), {}, a);
  LookupPlan other = Serve(*pool, Seq(0, 30), {}, b);
  EXPECT_EQ(other.kind, ReuseKind::kNone);
  EXPECT_EQ(other.n_reuse, 0);
  EXPECT_EQ(other.why_none, "RAM holds no conversations");
  EXPECT_EQ(pool->Peek(Seq(0, 40), a).n_reuse, 20);
  EXPECT_EQ(pool->Peek(Seq(0, 40), b).n_reuse, 30);
  EXPECT_EQ(pool->Peek(Seq(0, 40), {"c", true}).n_reuse, 0);
  // Shared: the longest of anyone's.
  EXPECT_EQ(pool->Peek(Seq(0, 40)).n_reuse, 30);
  std::vector<std::string> owners;
  for (const EntryStats& e : pool->Stats()) owners.push_back(e.tenant);
  std::sort(owners.begin(), owners.end());
  EXPECT_EQ(owners, (std::vector<std::string>{"a", "b"}));
}

// A shared start is copied only from the tenant's own chats.
TEST_F(RamPoolTest, IsolatedCopiesStayWithinTheTenant) {
  auto pool = MakePool(4, 1 << 20);
  std::vector<int32_t> chat = Seq(0, 20), other = Seq(0, 10);
  for (int32_t t = 100; t < 110; ++t) other.push_back(t);
  Serve(*pool, chat, {}, {"a", true});
  LookupPlan b = Serve(*pool, other, {}, {"b", true});
  EXPECT_EQ(b.kind, ReuseKind::kNone);
  LookupPlan a = Serve(*pool, other, {}, {"a", true});
  EXPECT_EQ(a.n_reuse, 10);
}

TEST_F(RamPoolTest, ForgettingATenantRemovesItsEntriesNotOthers) {
  auto pool = MakePool(8, 1 << 20);
  Serve(*pool, Seq(0, 20), {}, {"a", false});
  Serve(*pool, Seq(100, 130), {}, {"a", false});
  Serve(*pool, Seq(200, 210), {}, {"b", false});
  auto busy = pool->Acquire(Seq(300, 305), {"a", false});
  ASSERT_TRUE(busy.ok());
  Pool::Forgotten f = pool->ForgetTenant("a");
  EXPECT_EQ(f.entries, 2u);
  EXPECT_EQ(f.bytes, 5000u);
  EXPECT_EQ(f.in_use, 1u);
  EXPECT_TRUE(evicted_.empty());  // forgotten, not saved
  busy->state().content = Seq(300, 305);
  busy->Commit(Seq(300, 305), 5);  // its request ended: it goes too
  ASSERT_EQ(pool->Stats().size(), 1u);
  EXPECT_EQ(pool->Stats()[0].tenant, "b");
  EXPECT_EQ(pool->Peek(Seq(0, 25)).n_reuse, 0);
  EXPECT_EQ(pool->ForgetTenant("nobody").entries, 0u);
}

}  // namespace
}  // namespace mx::cache
