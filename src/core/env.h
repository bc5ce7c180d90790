// Env: the one seam for files, memory maps, clock, sleep and randomness
// (leveldb's Env). Everything above core/ does its I/O through an Env so that
// tests can inject faults and fake time. Env::Default() is the POSIX one.
// All methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx {

// A read-only view of a whole file. The bytes stay valid while the object lives.
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
  virtual const std::string& path() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never null; owned by the library.
  static Env* Default();

  // Maps `path` read-only. NotFound when missing, IOError otherwise.
  virtual Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) = 0;
  // Reads a whole file into memory.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Publishes `data` at `path` atomically: write `path`.tmp-<random>, fsync it,
  // rename over `path`, fsync the folder. On failure the old file (if any) is
  // left untouched and the temporary is removed. `mode` is the file's mode.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view data,
                                 uint32_t mode = 0644) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  // Creates the folder and any missing parents; OK when it already exists.
  virtual Status CreateDirs(const std::string& path, uint32_t mode = 0755) = 0;
  // Names (not paths) of the entries of a folder, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;

  // Monotonic clock in microseconds (for durations).
  virtual uint64_t NowMicros() = 0;
  // Wall clock, microseconds since the Unix epoch (for timestamps).
  virtual uint64_t WallMicros() = 0;
  virtual void SleepMicros(uint64_t micros) = 0;
  // Cryptographically strong random bytes (getrandom).
  virtual Status RandomBytes(void* buf, size_t n) = 0;
};

// Joins two path parts with exactly one '/'.
std::string JoinPath(std::string_view a, std::string_view b);

}  // namespace mx
