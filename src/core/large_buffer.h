// LargeBuffer: an owned, uninitialized byte block for big engine memory (the
// KV rows of a sequence). A block of at least kHugeMinBytes is 2 MiB-aligned,
// rounded up to whole 2 MiB pages and asked to be backed by transparent huge
// pages (madvise MADV_HUGEPAGE; where THP is off this is a no-op and plain
// pages are used). Fresh memory costs a page fault per page on first touch:
// for a restored 94 MB state that is ~45 faults instead of ~23 000, which is
// most of the difference between a restore at AES-GCM speed and one at half
// of it. Freed huge blocks are kept, up to kSpareBytes in all (oldest
// released first), and handed to the next block of about their size (at
// most a quarter larger), so a state that replaces one just freed (a restore
// after an eviction, a Reserve that grows) finds its pages already there.
// Move-only; thread-compatible (the spare list is thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mx {

class LargeBuffer {
 public:
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  static constexpr size_t kHugeMinBytes = size_t{4} << 20;
  static constexpr size_t kSpareBytes = size_t{256} << 20;

  LargeBuffer() = default;
  // `bytes` uninitialized bytes (none for 0). Throws std::bad_alloc when the
  // memory cannot be had, like operator new.
  explicit LargeBuffer(size_t bytes);
  // The same without throwing: an empty buffer (data() null) when `bytes`
  // (> 0) cannot be had.
  static LargeBuffer TryAllocate(size_t bytes);
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& other) noexcept;
  LargeBuffer& operator=(LargeBuffer&& other) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  // `bytes` of address space whose pages are backed only once written (an
  // anonymous mapping with MAP_NORESERVE, normal pages, never kept as a
  // spare): room for a state to grow to the whole context without ever
  // moving, costing memory only for what it holds. An empty buffer when the
  // address space cannot be had (strict overcommit).
  static LargeBuffer Lazy(size_t bytes);
  // Backs [offset, offset + n) with writable pages now, in one call
  // (MADV_POPULATE_WRITE) instead of a fault per page; a no-op where the
  // kernel lacks it or for a buffer that is not lazy. False when the kernel
  // could not back them (out of memory): writing there could then fault or
  // wake the OOM killer, so the caller must fail instead.
  bool Populate(size_t offset, size_t n) const;
  // Gives the whole pages inside [offset, offset + n) of a lazy buffer back
  // to the system (MADV_DONTNEED; they read as zeros afterwards); a no-op
  // for a buffer that is not lazy.
  void Discard(size_t offset, size_t n) const;
  bool lazy() const { return lazy_; }
  // Tests: make Lazy() fail as under strict overcommit (true) or work again.
  static void RefuseLazyForTesting(bool refuse);

  // Frees every kept block (memory pressure, tests, benchmarks).
  static void ReleaseSpares();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes reserved (size() rounded up to huge pages when they are used).
  size_t allocated() const { return allocated_; }

 private:
  void Release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t allocated_ = 0;
  bool lazy_ = false;
};

}  // namespace mx
