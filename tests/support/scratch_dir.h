// Test helpers for on-disk formats (leveldb's log_test style): a scratch
// folder removed at the end of the test, and helpers that read, flip,
// truncate and rewrite a file's bytes in place. Test-only; header-only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace mx::testing_support {

// A fresh folder under the test temp dir; removed (recursively) on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "mx") {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::path(::testing::TempDir()) /
             (tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A folder of this test process, removed with everything in it when the
// process's tests end (for files several tests of a binary share).
inline std::filesystem::path ProcessTempDir() {
  return std::filesystem::path(::testing::TempDir()) / ("mx_process_" + std::to_string(::getpid()));
}
class RemoveProcessTempDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(ProcessTempDir(), ec);
  }
};
inline ::testing::Environment* const kRemoveProcessTempDir =
    ::testing::AddGlobalTestEnvironment(new RemoveProcessTempDir);
// `name` in ProcessTempDir() (the folder is made when missing).
inline std::string ProcessTempPath(const std::string& name) {
  std::filesystem::create_directories(ProcessTempDir());
  return (ProcessTempDir() / name).string();
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// XORs the byte at `offset` with `mask` (default: flips every bit).
inline void FlipByte(const std::string& path, size_t offset, uint8_t mask = 0xff) {
  std::string b = ReadBytes(path);
  ASSERT_LT(offset, b.size()) << path;
  b[offset] = static_cast<char>(static_cast<uint8_t>(b[offset]) ^ mask);
  WriteBytes(path, b);
}

// Cuts the file to its first `size` bytes.
inline void TruncateTo(const std::string& path, size_t size) {
  std::filesystem::resize_file(path, size);
}

}  // namespace mx::testing_support
