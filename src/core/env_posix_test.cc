// PosixEnv's file checks: opening for reading never blocks on a FIFO and
// refuses anything but a regular file; symbolic links are followed only when
// asked; ownership, mode and modification time are read and set.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/env.h"
#include "fifo_trap.h"
#include "scratch_dir.h"

namespace mx {
namespace {

using testing_support::FifoTrap;
using testing_support::ScratchDir;
using testing_support::WriteBytes;

TEST(EnvPosixTest, ReadingAFifoIsRefusedWithoutBlocking) {
  ScratchDir dir("env");
  FifoTrap fifo(dir.Sub("pipe"));
  ASSERT_TRUE(fifo.ok());
  Env* env = Env::Default();
  auto read = env->ReadFile(fifo.path());
  auto mapped = env->MapReadOnly(fifo.path());
  auto file = env->NewRandomAccessFile(fifo.path());
  EXPECT_FALSE(fifo.hung()) << "an open for reading blocked on the FIFO";
  for (const Status& st : {read.status(), mapped.status(), file.status()}) {
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(fifo.path() + " is a FIFO"), std::string::npos) << st.ToString();
  }
}

// Exclusive locks exclude everyone, shared ones only exclusive holders;
// a lock goes with its object (flock locks are per open file, so two
// holders in one process conflict as two processes do).
TEST(EnvPosixTest, FileLocksExcludeAsAskedAndEndWithTheirObject) {
  ScratchDir dir("env");
  Env* env = Env::Default();
  const std::string path = dir.Sub("lock");
  {
    auto first = env->LockFile(path, /*exclusive=*/true);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto second = env->LockFile(path, true);
    EXPECT_EQ(second.status().code(), Status::Code::kResourceExhausted) << second.status().ToString();
    EXPECT_NE(second.status().message().find("is locked by another process"), std::string::npos);
    EXPECT_FALSE(env->LockFile(path, false).ok());
  }
  auto shared_a = env->LockFile(path, false);
  auto shared_b = env->LockFile(path, false);
  ASSERT_TRUE(shared_a.ok() && shared_b.ok());
  EXPECT_FALSE(env->LockFile(path, true).ok());
  shared_a->reset();
  shared_b->reset();
  EXPECT_TRUE(env->LockFile(path, true).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::symlink(path.c_str(), dir.Sub("link").c_str()), 0);
  EXPECT_FALSE(env->LockFile(dir.Sub("link"), true).ok());  // never through a symbolic link
}

TEST(EnvPosixTest, ReadingAFolderIsRefusedNamingIt) {
  ScratchDir dir("env");
  auto read = Env::Default()->ReadFile(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("is a folder, not a regular file"), std::string::npos)
      << read.status().ToString();
  EXPECT_FALSE(Env::Default()->NewRandomAccessFile(dir.path()).ok());
}

TEST(EnvPosixTest, SymlinksAreFollowedUnlessRefused) {
  ScratchDir dir("env");
  WriteBytes(dir.Sub("real"), "hello");
  std::filesystem::create_symlink(dir.Sub("real"), dir.Sub("link"));
  Env* env = Env::Default();
  auto followed = env->NewRandomAccessFile(dir.Sub("link"));
  ASSERT_TRUE(followed.ok()) << followed.status().ToString();
  EXPECT_EQ(followed.value()->size(), 5u);
  auto refused = env->NewRandomAccessFile(dir.Sub("link"), {.follow_symlinks = false});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("is a symbolic link"), std::string::npos);
  auto small = ReadSmallFile(env, dir.Sub("link"), {.follow_symlinks = false}, 100);
  EXPECT_FALSE(small.ok());
  auto direct = ReadSmallFile(env, dir.Sub("real"), {.follow_symlinks = false}, 100);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(direct.value(), "hello");
}

TEST(EnvPosixTest, SymlinkToAFifoIsRefusedWithoutBlocking) {
  ScratchDir dir("env");
  FifoTrap fifo(dir.Sub("pipe"));
  ASSERT_TRUE(fifo.ok());
  std::filesystem::create_symlink(fifo.path(), dir.Sub("link"));
  auto mapped = Env::Default()->MapReadOnly(dir.Sub("link"));
  EXPECT_FALSE(fifo.hung());
  ASSERT_FALSE(mapped.ok());
  EXPECT_NE(mapped.status().message().find("is a FIFO"), std::string::npos);
}

TEST(EnvPosixTest, ReadSmallFileRefusesLargerFiles) {
  ScratchDir dir("env");
  WriteBytes(dir.Sub("big"), std::string(200, 'x'));
  auto read = ReadSmallFile(Env::Default(), dir.Sub("big"), {}, 100);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument);
}

TEST(EnvPosixTest, LinkInfoDescribesTheLinkItself) {
  ScratchDir dir("env");
  WriteBytes(dir.Sub("real"), "hello");
  std::filesystem::create_symlink(dir.Sub("real"), dir.Sub("link"));
  ASSERT_EQ(::mkfifo(dir.Sub("pipe").c_str(), 0600), 0);
  Env* env = Env::Default();
  auto link = env->GetLinkInfo(dir.Sub("link"));
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->type, FileType::kSymlink);
  EXPECT_FALSE(link->is_regular);
  auto target = env->GetFileInfo(dir.Sub("link"));
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->type, FileType::kRegular);
  EXPECT_TRUE(target->is_regular);
  EXPECT_EQ(target->owner_uid, env->EffectiveUid());
  auto pipe = env->GetLinkInfo(dir.Sub("pipe"));
  ASSERT_TRUE(pipe.ok());
  EXPECT_EQ(pipe->type, FileType::kFifo);
  EXPECT_EQ(env->GetLinkInfo(dir.Sub("missing")).status().code(), Status::Code::kNotFound);
}

TEST(EnvPosixTest, ModeAndModifiedTimeAreSet) {
  ScratchDir dir("env");
  WriteBytes(dir.Sub("f"), "x");
  Env* env = Env::Default();
  ASSERT_TRUE(env->ChangeMode(dir.Sub("f"), 0640).ok());
  const uint64_t when_us = uint64_t{1700000000} * 1000000 + 123456;
  ASSERT_TRUE(env->SetModifiedTime(dir.Sub("f"), when_us).ok());
  auto info = env->GetFileInfo(dir.Sub("f"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->mode, 0640u);
  EXPECT_EQ(info->mtime_micros, when_us);
  EXPECT_EQ(env->SetModifiedTime(dir.Sub("missing"), when_us).code(), Status::Code::kNotFound);
}

}  // namespace
// The Rss (bytes) /proc/self/smaps gives the mapping that starts at `base`.
size_t MappingRss(const void* base) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      in = lo == reinterpret_cast<uintptr_t>(base);
      continue;
    }
    if (in && line.rfind("Rss:", 0) == 0) return std::stoul(line.substr(4)) * 1024;
  }
  return 0;
}

TEST(EnvPosixTest, DroppedPagesLeaveTheProcessAndReadBackFromTheFile) {
  ScratchDir dir("env");
  constexpr size_t kSize = size_t{8} << 20;
  std::string bytes(kSize, '\0');
  for (size_t i = 0; i < kSize; ++i) bytes[i] = static_cast<char>(i * 131 + i / 4096);
  WriteBytes(dir.Sub("weights"), bytes);
  auto mapped = Env::Default()->MapReadOnly(dir.Sub("weights"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  const uint8_t* data = (*mapped)->data();
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < kSize; i += 4096) sink = sink + data[i];
  const size_t before = MappingRss(data);
  ASSERT_GE(before, kSize - 64 * 1024) << "every page was read";
  // 4 MiB from an offset inside a page: only the whole pages inside go.
  (*mapped)->DropPages(100, size_t{4} << 20);
  const size_t after = MappingRss(data);
  EXPECT_LE(after, before - (size_t{4} << 20) + 4096);
  EXPECT_GE(after, before - (size_t{4} << 20) - 4096);
  EXPECT_EQ(0, std::memcmp(data, bytes.data(), kSize)) << "the bytes read back from the file";
  (*mapped)->DropPages(kSize - 10, 1000);  // past the end: clipped, nothing breaks
}

}  // namespace mx
