// SIGINT as "stop what you are doing" instead of "end the process", for an
// interactive command (`matricxon chat`: Ctrl-C stops a reply and returns to
// the prompt).
#pragma once

#include <signal.h>

namespace mx::cli {

// While an InterruptCatcher lives, SIGINT only raises a flag that the command
// polls (pending()); the handler is installed without SA_RESTART, so a blocking
// read returns EINTR and the reader can notice. The previous disposition comes
// back on destruction. At most one lives at a time (REQUIRES); the flag is safe
// to read from any thread.
class InterruptCatcher {
 public:
  InterruptCatcher();
  ~InterruptCatcher();
  InterruptCatcher(const InterruptCatcher&) = delete;
  InterruptCatcher& operator=(const InterruptCatcher&) = delete;

  // A SIGINT came since construction or the last Clear().
  bool pending() const;
  void Clear();
};

// Blocks SIGINT in the calling thread while it lives, so threads started
// meanwhile (a thread pool) inherit the block and SIGINT always lands on the
// thread that polls the flag. The previous mask comes back on destruction.
class ScopedBlockInterrupt {
 public:
  ScopedBlockInterrupt();
  ~ScopedBlockInterrupt();
  ScopedBlockInterrupt(const ScopedBlockInterrupt&) = delete;
  ScopedBlockInterrupt& operator=(const ScopedBlockInterrupt&) = delete;

 private:
  sigset_t old_mask_;
};

}  // namespace mx::cli
