// Disk store under injected faults (leveldb's fault_injection_test): disk
// full or I/O errors at every step of a Save, and crashes at every step.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "cache/disk_store/disk_test_util.h"
#include "core/fault_env.h"

namespace mx::cache {
namespace {

namespace fs = std::filesystem;

class DiskFaultTest : public DiskStoreTestBase {
 protected:
  // Every file in the folder that ends in .tmp.
  size_t Temporaries() const {
    size_t n = 0;
    for (const auto& name : Names()) n += name.ends_with(".tmp") ? 1 : 0;
    return n;
  }

  // Saves through `env` with the n-th matching operation failing with err.
  // Returns false once a Save went through without any fault.
  bool SaveWithFaultAt(int n, uint32_t mask, int err, Status::Code expected_code,
                       const SavedEntryInfo& old) {
    FaultEnv env(Env::Default());
    auto store = OpenStore(&env, key_);
    env.FailNth(mask, n, err);
    SaveMeta meta{kModelA};
    auto r = store->Save(meta, Tokens(1000, 40), Payload(1500, 77));
    if (env.faults_injected() == 0) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      return false;
    }
    EXPECT_FALSE(r.ok()) << "fault at op " << n;
    EXPECT_EQ(r.status().code(), expected_code) << r.status().ToString();
    // No partial file is visible, the older file is intact and loads.
    EXPECT_EQ(Names(), std::vector<std::string>{CacheFileName(old.id)}) << "fault at op " << n;
    EXPECT_TRUE(store->List().empty());
    auto check = Reopen();
    EXPECT_EQ(check->file_count(), 1u);
    auto loaded = check->Load(old.id, kModelA);
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return true;
  }
};

TEST_F(DiskFaultTest, DiskFullAtEveryWriteOfASave) {
  SavedEntryInfo old = SaveOk(Tokens(1, 20), Payload(900, 1));
  const uint32_t mask = FaultEnv::kAllOps & ~FaultEnv::kRemove;
  int n = 1;
  while (SaveWithFaultAt(n, mask, ENOSPC, Status::Code::kResourceExhausted, old)) ++n;
  // create, header, 7 chunks, sync, close, rename, folder sync.
  EXPECT_GE(n, 13);
}

TEST_F(DiskFaultTest, IoErrorAtEveryStepOfASave) {
  SavedEntryInfo old = SaveOk(Tokens(1, 20), Payload(900, 1));
  const uint32_t mask = FaultEnv::kAllOps & ~FaultEnv::kRemove;
  int n = 1;
  while (SaveWithFaultAt(n, mask, EIO, Status::Code::kIOError, old)) ++n;
  EXPECT_GE(n, 13);
}

TEST_F(DiskFaultTest, FolderNotWritableFailsSaveCleanly) {
  SavedEntryInfo old = SaveOk(Tokens(1, 20), "old");
  FaultEnv env(Env::Default());
  auto store = OpenStore(&env, key_);
  env.FailNth(FaultEnv::kCreate, 1, EACCES);
  SaveMeta meta{kModelA};
  auto r = store->Save(meta, Tokens(1, 10), "new");
  EXPECT_EQ(r.status().code(), Status::Code::kIOError);
  EXPECT_NE(r.status().message().find("Permission denied"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(Names(), std::vector<std::string>{CacheFileName(old.id)});
}

TEST_F(DiskFaultTest, AfterAFailedSaveTheNextSaveWorks) {
  FaultEnv env(Env::Default());
  auto store = OpenStore(&env, key_);
  env.FailNth(FaultEnv::kSync, 1, ENOSPC);
  SaveMeta meta{kModelA};
  EXPECT_FALSE(store->Save(meta, Tokens(1, 10), "x").ok());
  auto r = store->Save(meta, Tokens(1, 10), "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(store->Load(r->id, kModelA).ok());
}

// A crash at every step of a Save: the process stops at operation n (that
// and all later operations fail), then either the machine loses unsynced
// data (power cut) or keeps everything written (process crash). After a
// restart the folder holds the old file, plus at most the complete new one;
// never a temporary or a half file that loads.
void CrashAtEveryStep(DiskFaultTest* t, bool power_cut) {
  SavedEntryInfo old = t->SaveOk(Tokens(1, 20), Payload(900, 1));
  const auto tokens = Tokens(1000, 40);
  const auto payload = Payload(1500, 77);
  for (int n = 1;; ++n) {
    FaultEnv env(Env::Default());
    auto store = t->OpenStore(&env, t->key_);
    env.FailNth(FaultEnv::kAllOps, n, EIO, /*sticky=*/true);
    SaveMeta meta{kModelA};
    auto r = store->Save(meta, tokens, payload);
    const bool crashed = env.faults_injected() > 0;
    if (power_cut) {
      ASSERT_TRUE(env.DropUnsyncedData().ok());
    } else {
      env.ClearFaults();
    }
    store.reset();

    StartupReport report;
    auto check = t->Reopen(&report);
    std::vector<SavedEntryInfo> files = check->List();
    ASSERT_GE(files.size(), 1u) << "step " << n;
    ASSERT_LE(files.size(), 2u) << "step " << n;
    for (const auto& f : files) {
      auto loaded = check->Load(f.id, kModelA);
      ASSERT_TRUE(loaded.ok()) << "step " << n << ": " << loaded.status().ToString();
      if (f.id == old.id) {
        EXPECT_EQ(loaded->payload(), Payload(900, 1));
      } else {
        EXPECT_EQ(loaded->tokens, tokens);
        EXPECT_EQ(loaded->payload(), payload);
      }
    }
    EXPECT_EQ(report.removed_damaged, 0u) << "step " << n << ": no half file under the real name";
    for (const auto& name : t->Names()) {
      EXPECT_FALSE(name.ends_with(".tmp")) << "step " << n;
    }
    // Back to the old set for the next step.
    for (const auto& f : files) {
      if (f.id != old.id) {
        ASSERT_TRUE(check->Remove(f.id).ok());
      }
    }
    if (!crashed) {
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(files.size(), 2u) << "a completed Save survives the crash";
      EXPECT_GE(n, 13);
      return;
    }
  }
}

TEST_F(DiskFaultTest, PowerCutAtEveryStepOfASave) { CrashAtEveryStep(this, true); }
TEST_F(DiskFaultTest, ProcessCrashAtEveryStepOfASave) { CrashAtEveryStep(this, false); }

}  // namespace
}  // namespace mx::cache
