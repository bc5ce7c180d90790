#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace mx::cli {

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::Update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  int pct = static_cast<int>(done * 100 / total);
  if (pct == last_pct_ || (!tty_ && pct / 25 == last_pct_ / 25 && last_pct_ >= 0)) return;
  last_pct_ = pct;
  std::fprintf(stderr, "%s%s %3d%%", tty_ ? "\r" : "", label_.c_str(), pct);
  if (!tty_) std::fputc('\n', stderr);
  std::fflush(stderr);
}

void Progress::Done() {
  if (!enabled_) return;
  if (tty_) std::fprintf(stderr, "\r%s done\n", label_.c_str());
  else std::fprintf(stderr, "%s done\n", label_.c_str());
}

}  // namespace mx::cli
