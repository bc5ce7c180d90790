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
  // Says the bytes [offset, offset + n) will not be read again: the whole
  // pages inside leave the process's memory (a read after this maps them from
  // the file again). A no-op where the bytes are not a file mapping.
  virtual void DropPages(size_t offset, size_t n) const {
    (void)offset;
    (void)n;
  }
};

// A file written sequentially (leveldb's WritableFile). Not thread-safe: one
// writer at a time. Data is durable only after Sync() returns OK. The
// destructor closes the file (without syncing) if Close() was not called.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends bytes at the end. ResourceExhausted on ENOSPC/EDQUOT, IOError
  // otherwise; after a failure the file's length is unspecified.
  virtual Status Append(std::string_view data) = 0;
  // fsync: everything appended so far survives a crash once this returns OK.
  virtual Status Sync() = 0;
  // Closes the descriptor. Further calls are errors.
  virtual Status Close() = 0;
  virtual const std::string& path() const = 0;
};

// A file read at explicit offsets (pread). Thread-safe: Read may be called
// from several threads at once. Unlike a MappedFile, a file that shrinks
// while it is read gives a short read, never a SIGBUS.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at `offset` into scratch; returns the bytes read,
  // fewer than n only at the end of the file.
  virtual Result<size_t> Read(uint64_t offset, size_t n, char* scratch) const = 0;
  // The size when the file was opened.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

// A lock on a file (Env::LockFile), held until the object is destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

// What kind of thing a path names.
enum class FileType { kRegular, kDir, kSymlink, kFifo, kSocket, kCharDevice, kBlockDevice, kOther };
// "a regular file", "a folder", "a symbolic link", "a FIFO", ... (for messages).
const char* FileTypeName(FileType type);

// What stat(2) (or lstat(2), GetLinkInfo) says about a path.
struct FileInfo {
  uint64_t size_bytes = 0;
  uint32_t mode = 0;            // permission bits only (mode & 07777)
  uint64_t mtime_micros = 0;    // last modification, microseconds since the epoch
  uint32_t owner_uid = 0;       // st_uid
  FileType type = FileType::kOther;
  bool is_regular = false;  // type == kRegular
  bool is_dir = false;      // type == kDir
};

// How a file is opened for reading.
struct OpenOptions {
  // false: a path whose last component is a symbolic link is refused
  // (O_NOFOLLOW) instead of opening what it points to.
  bool follow_symlinks = true;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never null; owned by the library.
  static Env* Default();

  // Opening for reading (MapReadOnly, ReadFile, NewRandomAccessFile) never
  // blocks on what a path names: only regular files are opened, and a FIFO,
  // socket, device or folder is refused at once with InvalidArgument naming
  // the path and what it is ("... is a FIFO, not a regular file").

  // Maps `path` read-only. NotFound when missing, InvalidArgument when it is
  // not a regular file, IOError otherwise.
  virtual Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) = 0;
  // Reads a whole regular file into memory (errors as MapReadOnly).
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

  // --- Streaming writes and publication (added for the saved-cache store).
  // These have default bodies that return NotSupported, so Envs written
  // before them keep compiling; PosixEnv and EnvWrapper implement them.

  // Creates `path` for writing with permission bits `mode` (umask applies).
  // exclusive: O_EXCL, fails (IOError "... File exists") when the path
  // exists; otherwise an existing file is truncated. The caller owns the file.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                uint32_t mode, bool exclusive);
  // rename(2): atomically replaces `to` if it exists. Not durable until the
  // folder is synced (SyncDir).
  virtual Status RenameFile(const std::string& from, const std::string& to);
  // fsync of a folder: makes creations, renames and removals in it durable.
  virtual Status SyncDir(const std::string& path);
  // stat(2) of a path (follows symlinks). NotFound when missing.
  virtual Result<FileInfo> GetFileInfo(const std::string& path);
  // Opens a regular file for positional reads. NotFound when missing;
  // InvalidArgument when it is not a regular file, or (options) a symbolic
  // link that must not be followed.
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                        OpenOptions options = {});

  // --- Ownership and times (added for the saved-cache folder's checks).
  // Default bodies: NotSupported (EffectiveUid: geteuid()).

  // lstat(2): like GetFileInfo, but a symbolic link is described itself
  // (type kSymlink), not what it points to. NotFound when missing.
  virtual Result<FileInfo> GetLinkInfo(const std::string& path);
  // chmod(2): sets the permission bits of `path` (follows symlinks).
  virtual Status ChangeMode(const std::string& path, uint32_t mode);
  // Sets the modification time of a regular file (utimensat, not following
  // a symbolic link); the access time is left alone.
  virtual Status SetModifiedTime(const std::string& path, uint64_t mtime_micros);
  // The user id this process acts as (geteuid), for ownership checks.
  virtual uint32_t EffectiveUid();
  // Locks `path` (created 0600 when missing; a symbolic link is refused)
  // for as long as the returned object lives: `exclusive` for this process
  // alone, else shared with other shared holders (flock(2): held per open
  // file, released when the process dies). Never waits: ResourceExhausted
  // when another process holds a conflicting lock.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, bool exclusive);

  // Monotonic clock in microseconds (for durations).
  virtual uint64_t NowMicros() = 0;
  // Wall clock, microseconds since the Unix epoch (for timestamps).
  virtual uint64_t WallMicros() = 0;
  virtual void SleepMicros(uint64_t micros) = 0;
  // Cryptographically strong random bytes (getrandom).
  virtual Status RandomBytes(void* buf, size_t n) = 0;
};

// An Env that forwards every call to another one (leveldb's EnvWrapper).
// Subclass it and override what a test needs to change (see FaultEnv).
// REQUIRES: `target` outlives the wrapper.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override {
    return target_->MapReadOnly(path);
  }
  Result<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  Status WriteFileAtomic(const std::string& path, std::string_view data, uint32_t mode) override {
    return target_->WriteFileAtomic(path, data, mode);
  }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  Result<uint64_t> FileSize(const std::string& path) override { return target_->FileSize(path); }
  Status CreateDirs(const std::string& path, uint32_t mode) override {
    return target_->CreateDirs(path, mode);
  }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    return target_->ListDir(path);
  }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override {
    return target_->NewWritableFile(path, mode, exclusive);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status SyncDir(const std::string& path) override { return target_->SyncDir(path); }
  Result<FileInfo> GetFileInfo(const std::string& path) override {
    return target_->GetFileInfo(path);
  }
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                OpenOptions options = {}) override {
    return target_->NewRandomAccessFile(path, options);
  }
  Result<FileInfo> GetLinkInfo(const std::string& path) override {
    return target_->GetLinkInfo(path);
  }
  Status ChangeMode(const std::string& path, uint32_t mode) override {
    return target_->ChangeMode(path, mode);
  }
  Status SetModifiedTime(const std::string& path, uint64_t mtime_micros) override {
    return target_->SetModifiedTime(path, mtime_micros);
  }
  uint32_t EffectiveUid() override { return target_->EffectiveUid(); }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, bool exclusive) override {
    return target_->LockFile(path, exclusive);
  }
  uint64_t NowMicros() override { return target_->NowMicros(); }
  uint64_t WallMicros() override { return target_->WallMicros(); }
  void SleepMicros(uint64_t micros) override { target_->SleepMicros(micros); }
  Status RandomBytes(void* buf, size_t n) override { return target_->RandomBytes(buf, n); }

 private:
  Env* target_;
};

// Reads a whole regular file of at most `max_bytes` bytes through
// NewRandomAccessFile (so `options` apply, e.g. no symlinks in the cache
// folder). InvalidArgument when it is larger; other errors as that call.
Result<std::string> ReadSmallFile(Env* env, const std::string& path, OpenOptions options,
                                  uint64_t max_bytes);

// Joins two path parts with exactly one '/'.
std::string JoinPath(std::string_view a, std::string_view b);

}  // namespace mx
