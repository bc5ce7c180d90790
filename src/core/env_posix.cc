#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/env.h"

namespace mx {
namespace {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string msg = what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(msg);
  if (err == ENOSPC || err == EDQUOT) return Status::ResourceExhausted(msg);
  return Status::IOError(msg);
}

FileType TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDir;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  if (S_ISFIFO(mode)) return FileType::kFifo;
  if (S_ISSOCK(mode)) return FileType::kSocket;
  if (S_ISCHR(mode)) return FileType::kCharDevice;
  if (S_ISBLK(mode)) return FileType::kBlockDevice;
  return FileType::kOther;
}

FileInfo InfoOf(const struct stat& st) {
  FileInfo info;
  info.size_bytes = static_cast<uint64_t>(st.st_size);
  info.mode = static_cast<uint32_t>(st.st_mode & 07777);
  info.mtime_micros = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000u +
                      static_cast<uint64_t>(st.st_mtim.tv_nsec / 1000);
  info.owner_uid = static_cast<uint32_t>(st.st_uid);
  info.type = TypeOf(st.st_mode);
  info.is_regular = info.type == FileType::kRegular;
  info.is_dir = info.type == FileType::kDir;
  return info;
}

// Opens `path` for reading without ever blocking on it: O_NONBLOCK makes
// opening a FIFO (or a device) return at once, fstat then refuses anything
// but a regular file, and the flag is cleared again for the reads. With
// !follow_symlinks a symbolic link is refused (O_NOFOLLOW). On success *fd
// is open and *st describes it.
Status OpenRegularForRead(const std::string& path, OpenOptions options, int* fd, struct stat* st) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (!options.follow_symlinks) flags |= O_NOFOLLOW;
  int f = ::open(path.c_str(), flags);
  if (f < 0) {
    int err = errno;
    if (err == ELOOP && !options.follow_symlinks) {
      return Status::InvalidArgument(path + " is a symbolic link, which is not followed here");
    }
    return ErrnoStatus("open", path, err);
  }
  if (::fstat(f, st) != 0) {
    int err = errno;
    ::close(f);
    return ErrnoStatus("stat", path, err);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(f);
    return Status::InvalidArgument(path + " is " + FileTypeName(TypeOf(st->st_mode)) +
                                   ", not a regular file; not opened");
  }
  int fl = ::fcntl(f, F_GETFL);
  if (fl < 0 || ::fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int err = errno;
    ::close(f);
    return ErrnoStatus("fcntl", path, err);
  }
  *fd = f;
  return Status::Ok();
}

class PosixMappedFile final : public MappedFile {
 public:
  PosixMappedFile(std::string path, void* base, size_t size)
      : path_(std::move(path)), base_(base), size_(size) {}
  ~PosixMappedFile() override {
    if (base_ != nullptr && size_ > 0) munmap(base_, size_);
  }
  const uint8_t* data() const override { return static_cast<const uint8_t*>(base_); }
  size_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  void DropPages(size_t offset, size_t n) const override {
    if (base_ == nullptr || offset >= size_) return;
    n = std::min(n, size_ - offset);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t begin = (offset + page - 1) / page * page, end = (offset + n) / page * page;
    // A read-only private mapping never written: its pages come back from the file.
    if (end > begin) madvise(static_cast<uint8_t*>(base_) + begin, end - begin, MADV_DONTNEED);
  }

 private:
  std::string path_;
  void* base_;
  size_t size_;
};

Status WriteAll(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Append(std::string_view data) override {
    if (fd_ < 0) return Status::IOError("append to closed file " + path_);
    return WriteAll(fd_, data.data(), data.size(), path_);
  }
  Status Sync() override {
    if (fd_ < 0) return Status::IOError("sync of closed file " + path_);
    if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
    return Status::Ok();
  }
  Status Close() override {
    if (fd_ < 0) return Status::IOError("close of closed file " + path_);
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ErrnoStatus("close", path_, errno);
    return Status::Ok();
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  Result<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("read", path_, errno);
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
    }
    return done;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // closing the last descriptor releases the lock

 private:
  int fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, bool exclusive) override {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return ErrnoStatus("open (to lock)", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(path + " is not a regular file; it cannot be a lock file");
    }
    if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return Status::ResourceExhausted(path + " is locked by another process");
      }
      return ErrnoStatus("flock", path, err);
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override {
    int fd = -1;
    struct stat st;
    MX_RETURN_IF_ERROR(OpenRegularForRead(path, OpenOptions{}, &fd, &st));
    size_t size = static_cast<size_t>(st.st_size);
    void* base = nullptr;
    if (size > 0) {
      base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (base == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        return ErrnoStatus("mmap", path, err);
      }
    }
    ::close(fd);
    return std::unique_ptr<MappedFile>(new PosixMappedFile(path, base, size));
  }

  Result<std::string> ReadFile(const std::string& path) override {
    int fd = -1;
    struct stat st;
    MX_RETURN_IF_ERROR(OpenRegularForRead(path, OpenOptions{}, &fd, &st));
    std::string out;
    char buf[1 << 16];
    for (;;) {
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return ErrnoStatus("read", path, err);
      }
      if (r == 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    ::close(fd);
    return out;
  }

  Status WriteFileAtomic(const std::string& path, std::string_view data, uint32_t mode) override {
    uint64_t suffix = 0;
    MX_RETURN_IF_ERROR(RandomBytes(&suffix, sizeof(suffix)));
    std::string tmp = path + ".tmp-" + std::to_string(suffix);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return ErrnoStatus("create", tmp, errno);
    Status st = WriteAll(fd, data.data(), data.size(), tmp);
    if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("fsync", tmp, errno);
    if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("close", tmp, errno);
    if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("rename", tmp, errno);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
    std::string dir = DirName(path);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return ErrnoStatus("open folder", dir, errno);
    if (::fsync(dfd) != 0) st = ErrnoStatus("fsync folder", dir, errno);
    ::close(dfd);
    return st;
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  Result<uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  Status CreateDirs(const std::string& path, uint32_t mode) override {
    if (path.empty()) return Status::InvalidArgument("empty folder path");
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      partial = path.substr(0, pos);
      if (partial.empty()) continue;
      if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
        return ErrnoStatus("mkdir", partial, errno);
      }
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::IOError(path + " exists and is not a folder");
    }
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return ErrnoStatus("opendir", path, errno);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    return names;
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("unlink", path, errno);
    return Status::Ok();
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override {
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
    int fd = ::open(path.c_str(), flags, static_cast<mode_t>(mode));
    if (fd < 0) return ErrnoStatus("create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename", from + " to " + to, errno);
    return Status::Ok();
  }

  Status SyncDir(const std::string& path) override {
    int dfd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return ErrnoStatus("open folder", path, errno);
    Status st;
    if (::fsync(dfd) != 0) st = ErrnoStatus("fsync folder", path, errno);
    ::close(dfd);
    return st;
  }

  Result<FileInfo> GetFileInfo(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
    return InfoOf(st);
  }

  Result<FileInfo> GetLinkInfo(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus("lstat", path, errno);
    return InfoOf(st);
  }

  Status ChangeMode(const std::string& path, uint32_t mode) override {
    if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0)
      return ErrnoStatus("chmod", path, errno);
    return Status::Ok();
  }

  Status SetModifiedTime(const std::string& path, uint64_t mtime_micros) override {
    struct timespec times[2];
    times[0].tv_sec = 0;
    times[0].tv_nsec = UTIME_OMIT;
    times[1].tv_sec = static_cast<time_t>(mtime_micros / 1000000);
    times[1].tv_nsec = static_cast<long>((mtime_micros % 1000000) * 1000);
    if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoStatus("utimensat", path, errno);
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                OpenOptions options) override {
    int fd = -1;
    struct stat st;
    MX_RETURN_IF_ERROR(OpenRegularForRead(path, options, &fd, &st));
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  uint64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  uint64_t WallMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void SleepMicros(uint64_t micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
  Status RandomBytes(void* buf, size_t n) override {
    auto* p = static_cast<uint8_t*>(buf);
    while (n > 0) {
      ssize_t r = ::getrandom(p, n, 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::IOError(std::string("getrandom: ") + std::strerror(errno));
      }
      p += r;
      n -= static_cast<size_t>(r);
    }
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<WritableFile>> Env::NewWritableFile(const std::string& path, uint32_t,
                                                           bool) {
  return Status::NotSupported("this Env cannot create " + path + " (NewWritableFile)");
}
Status Env::RenameFile(const std::string& from, const std::string&) {
  return Status::NotSupported("this Env cannot rename " + from);
}
Status Env::SyncDir(const std::string& path) {
  return Status::NotSupported("this Env cannot sync folder " + path);
}
Result<FileInfo> Env::GetFileInfo(const std::string& path) {
  return Status::NotSupported("this Env cannot stat " + path);
}
Result<std::unique_ptr<RandomAccessFile>> Env::NewRandomAccessFile(const std::string& path,
                                                                   OpenOptions) {
  return Status::NotSupported("this Env cannot open " + path + " for positional reads");
}
Result<FileInfo> Env::GetLinkInfo(const std::string& path) {
  return Status::NotSupported("this Env cannot lstat " + path);
}
Status Env::ChangeMode(const std::string& path, uint32_t) {
  return Status::NotSupported("this Env cannot chmod " + path);
}
Status Env::SetModifiedTime(const std::string& path, uint64_t) {
  return Status::NotSupported("this Env cannot set the time of " + path);
}
uint32_t Env::EffectiveUid() { return static_cast<uint32_t>(::geteuid()); }
Result<std::unique_ptr<FileLock>> Env::LockFile(const std::string& path, bool) {
  return Status::NotSupported("this Env cannot lock " + path);
}

const char* FileTypeName(FileType type) {
  switch (type) {
    case FileType::kRegular:
      return "a regular file";
    case FileType::kDir:
      return "a folder";
    case FileType::kSymlink:
      return "a symbolic link";
    case FileType::kFifo:
      return "a FIFO (named pipe)";
    case FileType::kSocket:
      return "a socket";
    case FileType::kCharDevice:
      return "a character device";
    case FileType::kBlockDevice:
      return "a block device";
    case FileType::kOther:
      return "of an unknown file type";
  }
  return "not a regular file";
}

Result<std::string> ReadSmallFile(Env* env, const std::string& path, OpenOptions options,
                                  uint64_t max_bytes) {
  MX_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                      env->NewRandomAccessFile(path, options));
  if (file->size() > max_bytes) {
    return Status::InvalidArgument(path + " holds " + std::to_string(file->size()) +
                                   " bytes, more than the " + std::to_string(max_bytes) +
                                   " expected");
  }
  std::string out(static_cast<size_t>(file->size()), '\0');
  MX_ASSIGN_OR_RETURN(size_t n, file->Read(0, out.size(), out.data()));
  out.resize(n);
  return out;
}

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();
  return env;
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out.push_back('/');
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  out.append(b);
  return out;
}

}  // namespace mx
