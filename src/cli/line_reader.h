// Where `matricxon chat` reads the user's lines from.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace mx::cli {

// On a terminal: libedit (BSD-licensed), with emacs keys (arrows, Home/End,
// Ctrl-A/E/K/U/W, Alt-B/F, ...), Up/Down through the lines entered so far,
// the user's ~/.editrc, and UTF-8 input (LC_CTYPE is set from the environment,
// C.UTF-8 when that is not UTF-8). Elsewhere (a pipe, a file): plain lines,
// no prompt, no history.
// Not thread-safe: one reader on one thread.
class LineReader {
 public:
  enum class Outcome {
    kLine,         // *line holds the line, without its newline
    kEof,          // end of input (Ctrl-D on an empty line)
    kInterrupted,  // Ctrl-C while typing (an InterruptCatcher is live): the line is dropped
  };

  // `history_path` non-empty (terminal only): earlier lines are loaded from it
  // and every line added is saved to it; the file is created with mode 0600.
  // Errors: the history file cannot be created or read (IOError naming it).
  static Result<std::unique_ptr<LineReader>> Open(bool terminal, const std::string& history_path);
  virtual ~LineReader() = default;

  virtual Outcome Read(const std::string& prompt, std::string* line) = 0;
  // Remembers a line for Up/Down (and the history file). No-op off a terminal.
  virtual void AddHistory(const std::string& line) = 0;
  // True when this reader edits lines on a terminal.
  virtual bool editing() const = 0;
};

}  // namespace mx::cli
