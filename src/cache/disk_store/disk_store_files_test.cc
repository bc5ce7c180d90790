// The disk store's folder, one edge case per test: entries that are not
// regular files (FIFO, folder, symbolic link) with the store's names, names
// the store does not make, the folder's owner and mode, the last use kept
// across a restart, and a Purge racing a Save.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cache/disk_store/disk_test_util.h"
#include "fifo_trap.h"

namespace mx::cache {
namespace {

namespace fs = std::filesystem;
using testing_support::FifoTrap;
using testing_support::WriteBytes;

class DiskStoreFilesTest : public DiskStoreTestBase {};

uint32_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST_F(DiskStoreFilesTest, StartupCheckIndexesEveryGoodFileAroundAFifoFolderAndSymlink) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(500, 1));
  SavedEntryInfo b = SaveOk(Tokens(50, 10), Payload(700, 2));
  // Named exactly like saved caches, listed before and after the good ones.
  FifoTrap fifo(dir_.Sub(CacheFileName(std::string(32, '0'))));
  ASSERT_TRUE(fifo.ok());
  FifoTrap fifo_temp(dir_.Sub(TempFileName(std::string(32, '1'))));
  fs::create_directory(dir_.Sub(CacheFileName(std::string(32, 'e'))));
  const std::string link = dir_.Sub(CacheFileName(std::string(32, 'f')));
  fs::create_symlink(PathOf(a.id), link);
  FifoTrap other(dir_.Sub("x.mxpc"));  // not a name the store makes

  StartupReport r;
  auto store = Reopen(&r);
  EXPECT_FALSE(fifo.hung() || fifo_temp.hung() || other.hung()) << "the check opened a FIFO";
  EXPECT_EQ(r.files_ok, 2u) << r.ToString();
  EXPECT_EQ(store->file_count(), 2u);
  EXPECT_EQ(r.not_regular, 4u) << r.ToString();
  EXPECT_EQ(r.ignored, 1u);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_EQ(r.removed_damaged + r.removed_temporaries, 0u);
  EXPECT_NE(r.ToString().find("4 entries named like saved caches that are not regular files"),
            std::string::npos)
      << r.ToString();
  // Left alone: neither deleted nor followed (the link's target is a
  // separate, indexed file).
  EXPECT_TRUE(fs::is_fifo(fifo.path()));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_directory(dir_.Sub(CacheFileName(std::string(32, 'e')))));
  EXPECT_TRUE(store->Load(b.id, kModelA).ok());
}

TEST_F(DiskStoreFilesTest, InspectAndLoadNeverOpenAFifoOrFollowASymlink) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(500, 1));
  const std::string fifo_id(32, '0');
  FifoTrap fifo(dir_.Sub(CacheFileName(fifo_id)));
  ASSERT_TRUE(fifo.ok());
  auto inspected = store_->Inspect(fifo_id);
  EXPECT_FALSE(fifo.hung());
  ASSERT_FALSE(inspected.ok());
  EXPECT_NE(inspected.status().message().find("is a FIFO"), std::string::npos)
      << inspected.status().ToString();

  // A saved file replaced by a link to (a copy of) itself is not followed.
  fs::copy_file(PathOf(a.id), dir_.Sub("copy"));
  fs::remove(PathOf(a.id));
  fs::create_symlink(dir_.Sub("copy"), PathOf(a.id));
  auto loaded = store_->Load(a.id, kModelA);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("is a symbolic link"), std::string::npos)
      << loaded.status().ToString();
  EXPECT_TRUE(fs::exists(dir_.Sub("copy")));
}

TEST_F(DiskStoreFilesTest, PurgeDeletesOnlyNamesTheStoreMakes) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), "a");
  WriteBytes(dir_.Sub(TempFileName(std::string(32, '3'))), "stale");
  WriteBytes(dir_.Sub("notes.mxpc"), "mine");
  WriteBytes(dir_.Sub("mine.mxpc.tmp"), "mine too");
  WriteBytes(dir_.Sub(std::string(32, 'A') + ".mxpc"), "upper-case hex is not ours");
  fs::create_symlink(dir_.Sub("notes.mxpc"), dir_.Sub(CacheFileName(std::string(32, 'f'))));
  auto stats = store_->Purge();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->files, 1u);
  EXPECT_FALSE(fs::exists(PathOf(a.id)));
  EXPECT_EQ(Names(), (std::vector<std::string>{std::string(32, 'A') + ".mxpc",
                                               CacheFileName(std::string(32, 'f')), "mine.mxpc.tmp",
                                               "notes.mxpc"}));
}

TEST_F(DiskStoreFilesTest, RemovingSavedFilesWithoutAKeySparesOtherNames) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), "a");
  WriteBytes(dir_.Sub(TempFileName(std::string(32, '3'))), "stale");
  WriteBytes(dir_.Sub("notes.mxpc"), "mine");
  WriteBytes(dir_.Sub("mine.mxpc.tmp"), "mine too");
  WriteBytes(dir_.Sub(kKeyFileName), std::string(32, 'k'));
  auto stats = DiskStore::RemoveSavedFiles(Env::Default(), dir_.path());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->bytes, a.file_bytes + 5);
  EXPECT_EQ(Names(), (std::vector<std::string>{"mine.mxpc.tmp", "notes.mxpc", kKeyFileName}));
}

TEST_F(DiskStoreFilesTest, OpenChangesAFolderOpenToOthersTo0700) {
  const std::string dir = dir_.Sub("open");
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto store = DiskStore::Open(Env::Default(), dir, key_, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST_F(DiskStoreFilesTest, OpenRefusesAFolderOwnedByAnotherUser) {
  const std::string dir = dir_.Sub("theirs");
  fs::create_directory(dir);
  ASSERT_EQ(::chown(dir.c_str(), 12345, static_cast<gid_t>(-1)), 0);  // tests run as root
  auto store = DiskStore::Open(Env::Default(), dir, key_, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(store.status().message().find(dir + " is owned by uid 12345"), std::string::npos)
      << store.status().ToString();
}

TEST_F(DiskStoreFilesTest, LastUseSurvivesARestart) {
  const uint64_t now = Env::Default()->WallMicros();
  const uint64_t hour = uint64_t{3600} * 1000000;
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(1000, 1), kModelA, now - 3 * hour);
  SavedEntryInfo b = SaveOk(Tokens(50, 10), Payload(1000, 2), kModelA, now - 2 * hour);
  ASSERT_TRUE(store_->Load(a.id, kModelA).ok());  // A is now the most recently used
  store_.reset();

  auto store = Reopen();
  auto listed = store->List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, a.id);
  EXPECT_GE(listed[0].last_used_us, now);
  store->SetLimits({a.file_bytes, 0});  // room for one
  auto removed = store->EnforceLimits(Env::Default()->WallMicros());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->files, 1u);
  EXPECT_TRUE(fs::exists(PathOf(a.id)));
  EXPECT_FALSE(fs::exists(PathOf(b.id)));
}

// Blocks the first append to a saved cache's temporary until released.
class BlockingEnv : public EnvWrapper {
 public:
  BlockingEnv() : EnvWrapper(Env::Default()) {}

  class File : public WritableFile {
   public:
    File(BlockingEnv* env, std::unique_ptr<WritableFile> base)
        : env_(env), base_(std::move(base)) {}
    Status Append(std::string_view data) override {
      env_->WaitIfArmed();
      return base_->Append(data);
    }
    Status Sync() override { return base_->Sync(); }
    Status Close() override { return base_->Close(); }
    const std::string& path() const override { return base_->path(); }

   private:
    BlockingEnv* env_;
    std::unique_ptr<WritableFile> base_;
  };

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override {
    MX_ASSIGN_OR_RETURN(auto f, target()->NewWritableFile(path, mode, exclusive));
    if (path.find(".mxpc.tmp") == std::string::npos) return f;
    return std::unique_ptr<WritableFile>(new File(this, std::move(f)));
  }

  void WaitIfArmed() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_) return;
    armed_ = false;
    blocked_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return released_; });
  }
  void WaitUntilBlocked() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return blocked_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = true;
  bool blocked_ = false;
  bool released_ = false;
};

TEST_F(DiskStoreFilesTest, PurgeDuringASaveLeavesNoFileFromThatSave) {
  BlockingEnv env;
  auto store = OpenStore(&env, key_);
  SavedEntryInfo old = SaveOk(Tokens(1, 10), "old");  // through the plain store
  ASSERT_TRUE(store->StartupCheck().files_ok == 1);

  Result<SavedEntryInfo> saved = Status::Internal("not run");
  std::thread writer([&] {
    SaveMeta meta;
    meta.model = kModelA;
    saved = store->Save(meta, Tokens(7, 10), Payload(3000, 3));
  });
  env.WaitUntilBlocked();  // the temporary exists and is being written
  auto purged = store->Purge();
  env.Release();
  writer.join();

  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->files, 1u);
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.status().code(), Status::Code::kNotFound);
  EXPECT_NE(saved.status().message().find("deleted while it was being written"), std::string::npos)
      << saved.status().ToString();
  EXPECT_TRUE(Names().empty()) << Names().size() << " files left, e.g. " << Names()[0];
  EXPECT_EQ(store->file_count(), 0u);
  EXPECT_FALSE(fs::exists(PathOf(old.id)));
}

TEST_F(DiskStoreFilesTest, SaveAfterAPurgeIsKept) {
  SaveOk(Tokens(1, 10), "a");
  ASSERT_TRUE(store_->Purge().ok());
  SavedEntryInfo b = SaveOk(Tokens(1, 10), "b");
  EXPECT_TRUE(fs::exists(PathOf(b.id)));
  EXPECT_EQ(store_->file_count(), 1u);
}

}  // namespace
}  // namespace mx::cache
