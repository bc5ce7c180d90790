// Minimal leveled logging to stderr, one line per call, thread-safe.
//   MX_LOG(kInfo) << "loaded " << name;
// The level threshold comes from SetLogLevel() (the CLI maps --verbose to it).
#pragma once

#include <sstream>
#include <string>

namespace mx {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Writes "<time> <LEVEL> <message>\n" to stderr in one write, with every
// control character of `message` (CR, LF, NUL, ESC, ...) written as \xNN.
void LogLine(LogLevel level, const std::string& message);

class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { LogLine(level_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace mx

#define MX_LOG(level)                                                   \
  if (::mx::LogLevel::level < ::mx::GetLogLevel()) {                    \
  } else                                                                \
    ::mx::LogMessage(::mx::LogLevel::level).stream()
