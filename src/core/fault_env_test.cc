// The Env methods added for streaming writes (PosixEnv) and the FaultEnv
// built on them.
#include "core/fault_env.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "scratch_dir.h"

namespace mx {
namespace {

namespace fs = std::filesystem;
using testing_support::ReadBytes;
using testing_support::ScratchDir;

Status WriteWhole(Env* env, const std::string& path, std::string_view data, bool sync) {
  MX_ASSIGN_OR_RETURN(auto f, env->NewWritableFile(path, 0600, true));
  MX_RETURN_IF_ERROR(f->Append(data));
  if (sync) MX_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

TEST(PosixEnvTest, WritableFileAppendsSyncsAndCloses) {
  ScratchDir dir("env");
  Env* env = Env::Default();
  ASSERT_TRUE(WriteWhole(env, dir.Sub("a"), "hello world", true).ok());
  EXPECT_EQ(ReadBytes(dir.Sub("a")), "hello world");
  auto info = env->GetFileInfo(dir.Sub("a"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size_bytes, 11u);
  EXPECT_EQ(info->mode, 0600u);
  EXPECT_TRUE(info->is_regular);
  EXPECT_FALSE(info->is_dir);
  EXPECT_GT(info->mtime_micros, 0u);
}

TEST(PosixEnvTest, ExclusiveCreateFailsWhenTheFileExists) {
  ScratchDir dir("env");
  Env* env = Env::Default();
  ASSERT_TRUE(WriteWhole(env, dir.Sub("a"), "1", false).ok());
  EXPECT_FALSE(env->NewWritableFile(dir.Sub("a"), 0600, true).ok());
  auto f = env->NewWritableFile(dir.Sub("a"), 0600, false);  // truncates
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f.value()->Close().ok());
  EXPECT_EQ(ReadBytes(dir.Sub("a")), "");
}

TEST(PosixEnvTest, RenameReplacesAndSyncDirSucceeds) {
  ScratchDir dir("env");
  Env* env = Env::Default();
  ASSERT_TRUE(WriteWhole(env, dir.Sub("a"), "new", true).ok());
  ASSERT_TRUE(WriteWhole(env, dir.Sub("b"), "old", true).ok());
  ASSERT_TRUE(env->RenameFile(dir.Sub("a"), dir.Sub("b")).ok());
  ASSERT_TRUE(env->SyncDir(dir.path()).ok());
  EXPECT_FALSE(fs::exists(dir.Sub("a")));
  EXPECT_EQ(ReadBytes(dir.Sub("b")), "new");
  EXPECT_EQ(env->RenameFile(dir.Sub("missing"), dir.Sub("c")).code(), Status::Code::kNotFound);
  EXPECT_EQ(env->GetFileInfo(dir.Sub("missing")).status().code(), Status::Code::kNotFound);
}

TEST(PosixEnvTest, RandomAccessReadsAtOffsetsAndShortAtTheEnd) {
  ScratchDir dir("env");
  Env* env = Env::Default();
  ASSERT_TRUE(WriteWhole(env, dir.Sub("a"), "0123456789", true).ok());
  auto f = env->NewRandomAccessFile(dir.Sub("a"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.value()->size(), 10u);
  char buf[8];
  auto n = f.value()->Read(3, 4, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, n.value()), "3456");
  n = f.value()->Read(8, 8, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, n.value()), "89");
  EXPECT_EQ(env->NewRandomAccessFile(dir.Sub("missing")).status().code(), Status::Code::kNotFound);
}

TEST(FaultEnvTest, FailsTheNthMatchingOperationWithTheErrno) {
  ScratchDir dir("env");
  FaultEnv env(Env::Default());
  env.FailNth(FaultEnv::kAppend, 2, ENOSPC);
  auto f = env.NewWritableFile(dir.Sub("a"), 0600, true);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f.value()->Append("one").ok());
  Status st = f.value()->Append("two");
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_TRUE(f.value()->Append("three").ok());  // not sticky
  EXPECT_EQ(env.faults_injected(), 1);
  EXPECT_EQ(env.ops_counted(), 3);
  ASSERT_TRUE(f.value()->Close().ok());
  EXPECT_EQ(ReadBytes(dir.Sub("a")), "onethree");
}

TEST(FaultEnvTest, StickyFaultFailsEverythingAfter) {
  ScratchDir dir("env");
  FaultEnv env(Env::Default());
  env.FailNth(FaultEnv::kSync, 1, EIO, /*sticky=*/true);
  auto f = env.NewWritableFile(dir.Sub("a"), 0600, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f.value()->Append("x").ok());
  EXPECT_EQ(f.value()->Sync().code(), Status::Code::kIOError);
  EXPECT_FALSE(f.value()->Append("y").ok());
  EXPECT_FALSE(env.RenameFile(dir.Sub("a"), dir.Sub("b")).ok());
  EXPECT_FALSE(env.RemoveFile(dir.Sub("a")).ok());
  env.ClearFaults();
  EXPECT_TRUE(env.RemoveFile(dir.Sub("a")).ok());
}

TEST(FaultEnvTest, DropUnsyncedDataTruncatesAndUndoesUnsyncedNames) {
  ScratchDir dir("env");
  FaultEnv env(Env::Default());
  const std::string a = dir.Sub("a");
  const std::string b = dir.Sub("b");
  const std::string c = dir.Sub("c");
  auto f = env.NewWritableFile(a, 0600, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f.value()->Append("synced").ok());
  ASSERT_TRUE(f.value()->Sync().ok());
  ASSERT_TRUE(f.value()->Append("-lost").ok());
  ASSERT_TRUE(f.value()->Close().ok());
  ASSERT_TRUE(env.SyncDir(dir.path()).ok());
  ASSERT_TRUE(env.RenameFile(a, b).ok());                  // not made durable
  ASSERT_TRUE(WriteWhole(&env, c, "never synced", true).ok());  // name not durable
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_FALSE(fs::exists(b));
  EXPECT_FALSE(fs::exists(c));
  EXPECT_EQ(ReadBytes(a), "synced");
}

}  // namespace
}  // namespace mx
