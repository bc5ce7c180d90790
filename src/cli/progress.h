// A one-line progress display on stderr ("loading model.gguf  42%  120/286 MiB"),
// redrawn in place on a terminal and printed every 25 % otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace mx::cli {

class Progress {
 public:
  Progress(std::string label, bool enabled);
  void Update(uint64_t done, uint64_t total);
  void Done();

 private:
  std::string label_;
  bool enabled_;
  bool tty_;
  int last_pct_ = -1;
};

}  // namespace mx::cli
