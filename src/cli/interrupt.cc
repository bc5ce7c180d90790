#include "cli/interrupt.h"

#include <signal.h>

#include <atomic>
#include <cstring>

namespace mx::cli {
namespace {

std::atomic<bool> g_pending{false};
struct sigaction g_previous;

void OnInterrupt(int) { g_pending.store(true, std::memory_order_relaxed); }

}  // namespace

InterruptCatcher::InterruptCatcher() {
  g_pending.store(false);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read waiting for a line returns EINTR
  sigaction(SIGINT, &sa, &g_previous);
}

InterruptCatcher::~InterruptCatcher() { sigaction(SIGINT, &g_previous, nullptr); }

bool InterruptCatcher::pending() const { return g_pending.load(std::memory_order_relaxed); }

void InterruptCatcher::Clear() { g_pending.store(false, std::memory_order_relaxed); }

ScopedBlockInterrupt::ScopedBlockInterrupt() {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask_);
}

ScopedBlockInterrupt::~ScopedBlockInterrupt() { pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr); }

}  // namespace mx::cli
