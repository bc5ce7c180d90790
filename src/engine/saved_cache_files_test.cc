// SavedCacheStore and the files of its folder: starting with saving off
// deletes the saved files of an earlier run (as turning it off does), and
// no cleanup touches a name the store does not make.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/disk_store/disk_store.h"
#include "engine/saved_cache.h"
#include "scratch_dir.h"

namespace mx::engine {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchDir;
using testing_support::WriteBytes;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One saved cache in `dir`, sealed with the folder's generated key.
std::string SaveOneFile(const std::string& dir) {
  auto key = cache::KeyStore::Open(Env::Default(), dir, {});
  EXPECT_TRUE(key.ok()) << key.status().ToString();
  auto store = cache::DiskStore::Open(Env::Default(), dir, *key, {});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  cache::SaveMeta meta;
  meta.model = {"gguf-test:a", 1};
  auto saved = (*store)->Save(meta, std::vector<int32_t>{1, 2, 3}, "payload");
  EXPECT_TRUE(saved.ok()) << saved.status().ToString();
  return cache::CacheFileName(saved->id);
}

// Names a user may keep in the folder that merely end like the store's.
void WriteOtherFiles(const std::string& dir) {
  WriteBytes(dir + "/notes.mxpc", "mine");
  WriteBytes(dir + "/mine.mxpc.tmp", "mine too");
}

SavedCacheOptions Options(const std::string& dir, bool enabled) {
  SavedCacheOptions o;
  o.dir = dir;
  o.enabled = enabled;
  o.check_in_background = false;
  return o;
}

TEST(SavedCacheFilesTest, StartingWithSavingOffDeletesTheSavedFilesOfAnEarlierRun) {
  ScratchDir dir("scf");
  const std::string saved = SaveOneFile(dir.path());
  WriteBytes(dir.Sub(cache::TempFileName(std::string(32, '3'))), "stale");
  WriteOtherFiles(dir.path());
  ASSERT_TRUE(fs::exists(dir.Sub(saved)));

  auto store = SavedCacheStore::Open(Env::Default(), Options(dir.path(), false));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_FALSE((*store)->enabled());
  EXPECT_EQ(Names(dir.path()),
            (std::vector<std::string>{"mine.mxpc.tmp", "notes.mxpc", cache::kKeyFileName, kFolderLockFileName}));
}

TEST(SavedCacheFilesTest, StartingWithSavingOffInAnotherUsersFolderDeletesNothing) {
  ScratchDir dir("scf");
  const std::string saved = SaveOneFile(dir.path());
  ASSERT_EQ(::chown(dir.path().c_str(), 12345, static_cast<gid_t>(-1)), 0);  // tests run as root
  auto store = SavedCacheStore::Open(Env::Default(), Options(dir.path(), false));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE(fs::exists(dir.Sub(saved)));
}

TEST(SavedCacheFilesTest, PurgeWhileOffSparesNamesTheStoreDoesNotMake) {
  ScratchDir dir("scf");
  auto store = SavedCacheStore::Open(Env::Default(), Options(dir.path(), false));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string saved = SaveOneFile(dir.path());
  WriteOtherFiles(dir.path());
  auto purged = (*store)->Purge();
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->files, 1u);
  EXPECT_EQ(Names(dir.path()),
            (std::vector<std::string>{"mine.mxpc.tmp", "notes.mxpc", cache::kKeyFileName, kFolderLockFileName}));
}

TEST(SavedCacheFilesTest, TurningSavingOffSparesNamesTheStoreDoesNotMake) {
  ScratchDir dir("scf");
  const std::string saved = SaveOneFile(dir.path());
  auto store = SavedCacheStore::Open(Env::Default(), Options(dir.path(), true));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->enabled()) << (*store)->disabled_reason();
  WriteOtherFiles(dir.path());
  auto off = (*store)->SetEnabled(false);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->files, 1u);
  EXPECT_EQ(Names(dir.path()),
            (std::vector<std::string>{"mine.mxpc.tmp", "notes.mxpc", cache::kKeyFileName, kFolderLockFileName}));
}

}  // namespace
}  // namespace mx::engine
