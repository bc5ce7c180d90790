// Memory a hostile saved-cache file can make the store allocate before any
// tag is checked. Its own binary: it replaces the global operator new to
// record the largest single allocation while a check runs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "cache/disk_store/disk_test_util.h"

namespace {

std::atomic<bool> g_recording{false};
std::atomic<size_t> g_largest{0};

void* Allocate(size_t n) {
  if (g_recording.load(std::memory_order_relaxed)) {
    size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

// Replaced in pairs, so that every delete matches its new (sanitizers check).
void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace mx::cache {
namespace {

using testing_support::ReadBytes;
using testing_support::WriteBytes;

class DiskAllocTest : public DiskStoreTestBase {};

// Largest single allocation made by fn().
template <typename Fn>
size_t LargestAllocation(Fn&& fn) {
  g_largest = 0;
  g_recording = true;
  fn();
  g_recording = false;
  return g_largest.load();
}

TEST_F(DiskAllocTest, ForgedChunkSizeDoesNotAllocateBeyondTheFileBeforeATagIsChecked) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(2000, 1));
  ASSERT_LT(a.file_bytes, 4096u);
  // The header's chunk size (offset 48) claims the largest chunk there is;
  // nothing else changes. Every chunk's associated data covers the header,
  // so the file fails its first tag.
  std::string bytes = ReadBytes(PathOf(a.id));
  const uint32_t forged = kMaxChunkBytes;
  for (int i = 0; i < 4; ++i) bytes[48 + i] = static_cast<char>((forged >> (8 * i)) & 0xff);
  WriteBytes(PathOf(a.id), bytes);

  ThreadPool pool(4);
  StartupReport r;
  const size_t largest = LargestAllocation([&] {
    auto store = OpenStore(Env::Default(), key_);
    r = store->StartupCheck(&pool);
  });
  EXPECT_EQ(r.removed_damaged, 1u) << r.ToString();
  EXPECT_EQ(r.files_ok, 0u);
  // Buffers may hold the file's plaintext, never the forged 4 x 256 MiB.
  EXPECT_LE(largest, size_t{1} << 20) << "largest allocation " << largest << " bytes";
}

TEST_F(DiskAllocTest, InspectOfAForgedFileAllocatesNoMoreThanTheFileAllows) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(2000, 2));
  std::string bytes = ReadBytes(PathOf(a.id));
  const uint32_t forged = uint32_t{1} << 27;
  for (int i = 0; i < 4; ++i) bytes[48 + i] = static_cast<char>((forged >> (8 * i)) & 0xff);
  WriteBytes(PathOf(a.id), bytes);
  ThreadPool pool(4);
  Status st;
  const size_t largest = LargestAllocation([&] { st = store_->Inspect(a.id, &pool).status(); });
  EXPECT_EQ(st.code(), Status::Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("AEAD tag mismatch at chunk 0"), std::string::npos) << st.ToString();
  EXPECT_LE(largest, size_t{1} << 20) << "largest allocation " << largest << " bytes";
}

}  // namespace
}  // namespace mx::cache
