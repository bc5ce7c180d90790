#include <gtest/gtest.h>

#include "core/secure_compare.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/fp16.h"
#include "core/large_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace mx {
namespace {

TEST(StatusTest, CarriesCategoryAndContext) {
  Status s = Status::Corruption("tag mismatch").WithContext("file x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.ToString(), "Corruption: file x: tag mismatch");
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}
Result<int> Quarter(int x) {
  MX_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(Quarter(8).value(), 2);
  EXPECT_EQ(Quarter(6).status().code(), Status::Code::kInvalidArgument);
}

TEST(Fp16Test, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = Fp16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToFp16(f), h) << h;
  }
}

TEST(Fp16Test, RoundsToNearestEven) {
  // 1 + 2^-11 is exactly halfway between 1 and the next half (1 + 2^-10): ties to even -> 1.
  EXPECT_EQ(F32ToFp16(1.0f + 1.0f / 2048), 0x3c00);
  EXPECT_EQ(F32ToFp16(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_EQ(F32ToFp16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(F32ToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToFp16(5.9604645e-8f), 0x0001);  // smallest subnormal
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBf16(F32FromBits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(F32ToBf16(F32FromBits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
}

TEST(DTypeTest, RowBytesFollowsBlocks) {
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 33), 0u);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 256), 144u);
  EXPECT_EQ(DTypeName(99), "type#99");
}

TEST(ThreadPoolTest, RunsEveryTaskOnce) {
  ThreadPool pool(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(1000);
    pool.ParallelFor(1000, [&](int64_t t, int thread) {
      ASSERT_LT(thread, 3);
      hits[t].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

// Many tiny jobs in a row: a worker that wakes late must never run a task of
// a newer job with an older job's function, nor run a task twice.
TEST(ThreadPoolTest, BackToBackSmallJobsRunEachTaskOnce) {
  ThreadPool pool(4);
  for (int round = 0; round < 20000; ++round) {
    const int64_t n = 1 + round % 7;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.ParallelFor(n, [&](int64_t t, int) { hits[static_cast<size_t>(t)].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "round " << round;
  }
}

// A job longer than one job's 16-bit task range runs as several.
TEST(ThreadPoolTest, LongLoopsRunEveryTaskOnce) {
  ThreadPool pool(2);
  std::vector<std::atomic<uint8_t>> hits(200000);
  pool.ParallelFor(static_cast<int64_t>(hits.size()),
                   [&](int64_t t, int) { hits[static_cast<size_t>(t)].fetch_add(1); });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

// Each thread starts on its own range (the worker on [50, 100)); a thread that
// is held up has the rest of its range taken from the far end by the others.
TEST(ThreadPoolTest, ABusyThreadsRangeIsTakenOver) {
  ThreadPool pool(2);
  std::atomic<bool> worker_started{false};
  std::atomic<int> ran[2] = {0, 0};
  std::vector<int> worker_tasks;
  auto wait_for = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return done();
  };
  pool.ParallelFor(100, [&](int64_t t, int thread) {
    if (thread == 0 && t == 0) {
      ASSERT_TRUE(wait_for([&] { return worker_started.load(); }));
    }
    if (thread == 1) {
      worker_tasks.push_back(static_cast<int>(t));
      worker_started = true;
      // Held until the caller has run everything else.
      ASSERT_TRUE(wait_for([&] { return ran[0].load() == 99; }));
    }
    ran[thread].fetch_add(1);
  });
  EXPECT_EQ(ran[0].load(), 99);
  EXPECT_EQ(ran[1].load(), 1);
  EXPECT_EQ(worker_tasks, std::vector<int>{50});
}

TEST(LargeBufferTest, BigBlocksAreHugePageAlignedAndMovesTransferOwnership) {
  LargeBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  LargeBuffer small(1000);
  EXPECT_EQ(small.size(), 1000u);
  EXPECT_EQ(small.allocated(), 1000u);
  small.data()[999] = 7;
  LargeBuffer big(LargeBuffer::kHugeMinBytes + 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % LargeBuffer::kHugePageBytes, 0u);
  EXPECT_EQ(big.allocated(), LargeBuffer::kHugeMinBytes + LargeBuffer::kHugePageBytes);
  big.data()[big.size() - 1] = 9;
  uint8_t* p = big.data();
  LargeBuffer moved(std::move(big));
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(big.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  moved = std::move(small);
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(moved.data()[999], 7);
}

TEST(LargeBufferTest, FreedHugeBlocksAreReusedForAboutTheirSize) {
  LargeBuffer::ReleaseSpares();
  const size_t bytes = LargeBuffer::kHugeMinBytes * 2;
  uint8_t* first = nullptr;
  {
    LargeBuffer a(bytes);
    first = a.data();
    a.data()[0] = 1;
  }
  LargeBuffer b(bytes - 100);  // rounds to the same huge pages: the kept block
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.allocated(), bytes);
  LargeBuffer c(bytes);  // nothing kept now: a fresh block
  EXPECT_NE(c.data(), first);
  EXPECT_EQ(c.allocated(), bytes);
  {
    LargeBuffer far_larger(bytes * 2);  // kept, but too large for `bytes`
  }
  LargeBuffer d(bytes);
  EXPECT_EQ(d.allocated(), bytes);
  LargeBuffer::ReleaseSpares();
}

TEST(LargeBufferTest, LazyBlocksAreAddressSpaceUntilWritten) {
  // 64 GiB of address space: more than this machine's memory, so it can only
  // work if pages are backed as they are written.
  const size_t bytes = size_t{64} << 30;
  LargeBuffer lazy = LargeBuffer::Lazy(bytes);
  ASSERT_NE(lazy.data(), nullptr);
  EXPECT_TRUE(lazy.lazy());
  EXPECT_EQ(lazy.size(), bytes);
  lazy.Populate(bytes / 2, 1 << 20);
  lazy.data()[0] = 1;
  lazy.data()[bytes / 2 + 12345] = 2;
  lazy.data()[bytes - 1] = 3;
  EXPECT_EQ(lazy.data()[bytes / 2 + 12345], 2);
  LargeBuffer moved(std::move(lazy));
  EXPECT_TRUE(moved.lazy());
  EXPECT_EQ(moved.data()[bytes - 1], 3);
  EXPECT_FALSE(lazy.lazy());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  moved = LargeBuffer(100);  // the mapping is released; a plain block takes its place
  EXPECT_FALSE(moved.lazy());
  EXPECT_TRUE(LargeBuffer::Lazy(0).data() == nullptr);
}

TEST(EnvTest, AtomicWriteThenRead) {
  Env* env = Env::Default();
  std::string dir = ::testing::TempDir() + "/mx_env_test";
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  std::string path = JoinPath(dir, "f.bin");
  ASSERT_TRUE(env->WriteFileAtomic(path, "hello").ok());
  auto read = env->ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.value(), "hello");
  auto mapped = env->MapReadOnly(path);
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(mapped.value()->size(), 5u);
  EXPECT_EQ(env->MapReadOnly(dir + "/missing").status().code(), Status::Code::kNotFound);
  ASSERT_TRUE(env->RemoveFile(path).ok());
}

}  // namespace
}  // namespace mx

namespace mx {
namespace {

TEST(ConstantTimeEqualsTest, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(ConstantTimeEquals("Bearer s3cret", "Bearer s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer s3cret", "Bearer s3creT"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer s3cret", "Bearer s3cre"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer s3cret", "Bearer s3cretX"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer s3cret", ""));
  // A candidate that repeats the secret (the cyclic read) is still different.
  EXPECT_FALSE(ConstantTimeEquals("ab", "abab"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
}

}  // namespace
}  // namespace mx
