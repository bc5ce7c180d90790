#include "core/large_buffer.h"

#include <cerrno>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace mx {
namespace {

// Huge blocks freed lately, kept (already faulted in) for the next block of
// about their size. Intentionally never destroyed: buffers may die during
// static destruction.
class SpareBlocks {
 public:
  // A kept block of `bytes` to at most a quarter more (the smallest such),
  // or null. *got: its size.
  void* Take(size_t bytes, size_t* got) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = blocks_.size();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const size_t b = blocks_[i].bytes;
      if (b >= bytes && b <= bytes + bytes / 4 && (best == blocks_.size() || b < blocks_[best].bytes)) best = i;
    }
    if (best == blocks_.size()) return nullptr;
    void* p = blocks_[best].p;
    *got = blocks_[best].bytes;
    kept_bytes_ -= *got;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
    return p;
  }
  // Keeps a freed block (none when p is null), releasing the oldest ones
  // over `budget` bytes.
  void Give(void* p, size_t bytes, size_t budget = LargeBuffer::kSpareBytes) {
    std::vector<void*> release;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (p != nullptr) {
        blocks_.push_back({p, bytes});
        kept_bytes_ += bytes;
      }
      while (kept_bytes_ > budget) {
        release.push_back(blocks_.front().p);
        kept_bytes_ -= blocks_.front().bytes;
        blocks_.erase(blocks_.begin());
      }
    }
    for (void* r : release) std::free(r);
  }

 private:
  struct Block {
    void* p;
    size_t bytes;
  };
  std::mutex mu_;
  std::vector<Block> blocks_;  // oldest first
  size_t kept_bytes_ = 0;
};

SpareBlocks& Spares() {
  static SpareBlocks* spares = new SpareBlocks;
  return *spares;
}

}  // namespace

LargeBuffer::LargeBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  if (bytes >= kHugeMinBytes) {
    allocated_ = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    size_t got = 0;
    p = Spares().Take(allocated_, &got);
    if (p != nullptr) {
      allocated_ = got;
    } else {
      p = std::aligned_alloc(kHugePageBytes, allocated_);
      // Advice only: without THP the block simply uses normal pages.
      if (p != nullptr) ::madvise(p, allocated_, MADV_HUGEPAGE);
    }
  } else {
    allocated_ = bytes;
    p = std::malloc(bytes);
  }
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
}

namespace {
std::atomic<bool> refuse_lazy{false};
}  // namespace

void LargeBuffer::RefuseLazyForTesting(bool refuse) { refuse_lazy = refuse; }

LargeBuffer LargeBuffer::Lazy(size_t bytes) {
  LargeBuffer b;
  if (bytes == 0 || refuse_lazy) return b;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) return b;
  // Normal pages: a state's layers each fill their own region, and a huge
  // page at the end of every region would cost up to 2 MiB per region.
  ::madvise(p, bytes, MADV_NOHUGEPAGE);
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = bytes;
  b.allocated_ = bytes;
  b.lazy_ = true;
  return b;
}

LargeBuffer LargeBuffer::TryAllocate(size_t bytes) {
  try {
    return LargeBuffer(bytes);
  } catch (const std::bad_alloc&) {
    return LargeBuffer();
  }
}

bool LargeBuffer::Populate(size_t offset, size_t n) const {
#ifdef MADV_POPULATE_WRITE
  if (!lazy_ || n == 0 || offset >= size_) return true;
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  const size_t end = std::min(size_, offset + n);
  if (::madvise(data_ + begin, end - begin, MADV_POPULATE_WRITE) == 0) return true;
  // EINVAL: a kernel without MADV_POPULATE_WRITE (pages then fault in as
  // they are written). ENOMEM, EFAULT, EHWPOISON: the memory is not there.
  return errno == EINVAL;
#else
  (void)offset;
  (void)n;
  return true;
#endif
}

void LargeBuffer::Discard(size_t offset, size_t n) const {
  if (!lazy_ || n == 0 || offset >= size_) return;
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = (offset + page - 1) / page * page;
  const size_t end = std::min(size_, offset + n) / page * page;
  if (end > begin) ::madvise(data_ + begin, end - begin, MADV_DONTNEED);
}

LargeBuffer::~LargeBuffer() { Release(); }

void LargeBuffer::ReleaseSpares() { Spares().Give(nullptr, 0, 0); }

void LargeBuffer::Release() {
  if (lazy_) {
    if (data_ != nullptr) ::munmap(data_, allocated_);
  } else if (data_ != nullptr && size_ >= kHugeMinBytes) {
    Spares().Give(data_, allocated_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  lazy_ = false;
}

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      allocated_(std::exchange(other.allocated_, 0)),
      lazy_(std::exchange(other.lazy_, false)) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    allocated_ = std::exchange(other.allocated_, 0);
    lazy_ = std::exchange(other.lazy_, false);
  }
  return *this;
}

}  // namespace mx
