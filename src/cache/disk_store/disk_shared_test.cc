// Several stores on one folder, as cluster nodes on a shared filesystem
// (docs/cluster.md): refresh, temporaries of other writers, loads racing a
// delete, the budget over the folder, and faults on one node.
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/disk_store/disk_test_util.h"
#include "core/fault_env.h"

namespace mx::cache {
namespace {

namespace fs = std::filesystem;

class DiskSharedTest : public DiskStoreTestBase {
 protected:
  // Another node: a store over the same folder with the same key, checked.
  std::unique_ptr<DiskStore> Node(Env* env = Env::Default(), bool shared = true,
                                  DiskLimits limits = DiskLimits{}) {
    DiskStoreOptions options;
    options.chunk_bytes = kChunk;
    options.limits = limits;
    options.shared_folder = shared;
    auto store = DiskStore::Open(env, dir_.path(), key_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    (*store)->StartupCheck();
    return std::move(store).value();
  }
  static SavedEntryInfo SaveOn(DiskStore* store, const std::vector<int32_t>& tokens,
                               const std::string& payload, uint64_t last_used_us = 0) {
    SaveMeta meta;
    meta.model = kModelA;
    meta.last_used_us = last_used_us;
    meta.created_us = last_used_us;
    auto info = store->Save(meta, tokens, payload);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info.value() : SavedEntryInfo{};
  }
  void WriteTemp(const std::string& name, uint64_t mtime_us) {
    std::ofstream(dir_.Sub(name)) << "partial";
    ASSERT_TRUE(Env::Default()->SetModifiedTime(dir_.Sub(name), mtime_us).ok());
  }
};

TEST_F(DiskSharedTest, RefreshFindsAFileAnotherNodeWrote) {
  auto a = Node();
  auto b = Node();
  const std::vector<int32_t> chat = Tokens(7, 300);  // metadata spans several 256-byte chunks
  SavedEntryInfo saved = SaveOn(a.get(), chat, Payload(5000, 3));
  EXPECT_FALSE(b->FindLongestPrefix(kModelA, chat).found);

  RefreshReport r = b->Refresh(/*force=*/true);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.listed, 1u);
  EXPECT_EQ(r.added, 1u);
  PrefixMatch m = b->FindLongestPrefix(kModelA, chat);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.entry.id, saved.id);
  EXPECT_EQ(m.common_prefix, chat.size());
  EXPECT_EQ(m.entry.payload_bytes, 5000u);
  auto loaded = b->Load(saved.id, kModelA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->payload(), Payload(5000, 3));
  EXPECT_EQ(loaded->tokens, chat);
}

TEST_F(DiskSharedTest, RefreshReadsOnlyNewNamesAndForgetsRemovedOnes) {
  auto a = Node();
  auto b = Node();
  SavedEntryInfo first = SaveOn(a.get(), Tokens(1, 10), "one");
  EXPECT_EQ(b->Refresh(true).added, 1u);
  SavedEntryInfo second = SaveOn(a.get(), Tokens(100, 10), "two");
  RefreshReport r = b->Refresh(true);
  EXPECT_EQ(r.listed, 2u);
  EXPECT_EQ(r.added, 1u);  // the known file is not read again
  ASSERT_TRUE(a->Remove(first.id).ok());
  r = b->Refresh(true);
  EXPECT_EQ(r.forgotten, 1u);
  EXPECT_EQ(b->file_count(), 1u);
  EXPECT_EQ(b->List()[0].id, second.id);
}

TEST_F(DiskSharedTest, RefreshIsRateLimitedUnlessForced) {
  auto b = Node();
  EXPECT_TRUE(b->Refresh().ran);
  EXPECT_FALSE(b->Refresh().ran);  // within 250 ms of the last
  EXPECT_TRUE(b->Refresh(true).ran);
}

TEST_F(DiskSharedTest, RefreshIsDueOnceCheckedAndAfterItsInterval) {
  DiskStoreOptions options;
  options.chunk_bytes = kChunk;
  options.shared_folder = true;
  options.refresh_interval_us = uint64_t{3600} * 1000000;
  auto b = DiskStore::Open(Env::Default(), dir_.path(), key_, options).value();
  EXPECT_FALSE(b->RefreshDue());  // the start-up check has not run
  b->StartupCheck();
  EXPECT_TRUE(b->RefreshDue());  // none ran yet
  EXPECT_TRUE(b->Refresh().ran);
  EXPECT_FALSE(b->RefreshDue());  // within the hour
  options.refresh_interval_us = 0;
  auto c = DiskStore::Open(Env::Default(), dir_.path(), key_, options).value();
  c->StartupCheck();
  EXPECT_TRUE(c->Refresh().ran);
  EXPECT_TRUE(c->RefreshDue());
}

// A folder that cannot be listed leaves the index as it was and says why.
TEST_F(DiskSharedTest, ARefreshThatCannotListTheFolderSaysWhy) {
  class NoListing : public EnvWrapper {
   public:
    NoListing() : EnvWrapper(Env::Default()) {}
    bool fail = false;
    Result<std::vector<std::string>> ListDir(const std::string& path) override {
      if (fail) return Status::IOError("stale file handle");
      return target()->ListDir(path);
    }
  } env;
  auto a = Node();
  auto b = Node(&env);
  SaveOn(a.get(), Tokens(1, 10), "one");
  env.fail = true;
  RefreshReport r = b->Refresh(true);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.status.code(), Status::Code::kIOError);
  EXPECT_NE(r.status.ToString().find(dir_.path()), std::string::npos) << r.status.ToString();
  EXPECT_NE(r.status.ToString().find("stale file handle"), std::string::npos) << r.status.ToString();
  EXPECT_EQ(b->file_count(), 0u);
  env.fail = false;
  r = b->Refresh(true);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.added, 1u);
}

TEST_F(DiskSharedTest, RefreshReadsAtMostTheBoundOfNewFiles) {
  auto a = Node();
  DiskStoreOptions options;
  options.chunk_bytes = kChunk;
  options.shared_folder = true;
  options.refresh_max_new_files = 2;
  auto opened = DiskStore::Open(Env::Default(), dir_.path(), key_, options);
  ASSERT_TRUE(opened.ok());
  auto b = std::move(opened).value();
  b->StartupCheck();
  for (int i = 0; i < 5; ++i) SaveOn(a.get(), Tokens(10 * i + 1, 5), "x");
  RefreshReport r = b->Refresh(true);
  EXPECT_EQ(r.added, 2u);
  EXPECT_EQ(r.left, 3u);
  EXPECT_EQ(b->Refresh(true).added, 2u);
  EXPECT_EQ(b->Refresh(true).added, 1u);
  EXPECT_EQ(b->file_count(), 5u);
}

TEST_F(DiskSharedTest, RefreshDeletesADamagedNewFileAndLeavesAnotherKeysAlone) {
  auto a = Node();
  auto b = Node();
  SavedEntryInfo bad = SaveOn(a.get(), Tokens(1, 10), Payload(600, 1));
  {
    std::fstream f(PathOf(bad.id), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kDiskHeaderBytes + 3);
    f.put('\x5a');
  }
  KeyStore other_key = KeyStore::FromKey(TestKey(9), KeySource::kPassphrase);
  DiskStoreOptions options;
  options.chunk_bytes = kChunk;
  auto other = DiskStore::Open(Env::Default(), dir_.path(), other_key, options);
  ASSERT_TRUE(other.ok());
  SaveMeta meta{kModelA};
  auto foreign = (*other)->Save(meta, Tokens(50, 10), "f");
  ASSERT_TRUE(foreign.ok());

  RefreshReport r = b->Refresh(true);
  EXPECT_EQ(r.added, 0u);
  EXPECT_EQ(r.rejected, 2u);
  EXPECT_FALSE(fs::exists(PathOf(bad.id)));
  EXPECT_TRUE(fs::exists(PathOf(foreign->id)));
  EXPECT_EQ(b->Refresh(true).rejected, 0u);  // not read again
}

TEST_F(DiskSharedTest, StartupInASharedFolderKeepsYoungTemporaries) {
  const uint64_t now = Env::Default()->WallMicros();
  const std::string young = std::string(32, 'a') + ".mxpc.tmp";
  const std::string stale = std::string(32, 'b') + ".mxpc.tmp";
  WriteTemp(young, now - uint64_t{60} * 1000000);       // another node's write, a minute in
  WriteTemp(stale, now - uint64_t{20} * 60 * 1000000);  // 20 minutes untouched: a crash's
  auto c = Node();
  EXPECT_TRUE(fs::exists(dir_.Sub(young)));
  EXPECT_FALSE(fs::exists(dir_.Sub(stale)));
}

TEST_F(DiskSharedTest, StartupOfASingleNodeDeletesEveryTemporary) {
  WriteTemp(std::string(32, 'a') + ".mxpc.tmp", Env::Default()->WallMicros());
  auto c = Node(Env::Default(), /*shared=*/false);
  EXPECT_TRUE(Names().empty());
}

TEST_F(DiskSharedTest, PurgeInASharedFolderKeepsYoungTemporaries) {
  auto a = Node();
  auto b = Node();
  SaveOn(a.get(), Tokens(1, 40), Payload(3000, 1));
  SaveOn(b.get(), Tokens(2, 40), Payload(3000, 2));
  const uint64_t now = Env::Default()->WallMicros();
  const std::string young = std::string(32, 'a') + ".mxpc.tmp";
  const std::string stale = std::string(32, 'b') + ".mxpc.tmp";
  WriteTemp(young, now - uint64_t{60} * 1000000);       // another node's write in progress
  WriteTemp(stale, now - uint64_t{20} * 60 * 1000000);  // a crash's leftover
  auto removed = a->Purge();
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->files, 2u);  // b's file too, though a never indexed it
  EXPECT_EQ(Names(), std::vector<std::string>{young});
}

TEST_F(DiskSharedTest, PurgeOfASingleNodeDeletesEveryTemporary) {
  auto a = Node(Env::Default(), /*shared=*/false);
  SaveOn(a.get(), Tokens(1, 40), Payload(3000, 1));
  WriteTemp(std::string(32, 'a') + ".mxpc.tmp", Env::Default()->WallMicros());
  auto removed = a->Purge();
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->files, 1u);
  EXPECT_TRUE(Names().empty());
}

TEST_F(DiskSharedTest, SharedStartupLeavesFilesOfAnotherKey) {
  KeyStore other_key = KeyStore::FromKey(TestKey(9), KeySource::kPassphrase);
  DiskStoreOptions options;
  options.chunk_bytes = kChunk;
  auto other = DiskStore::Open(Env::Default(), dir_.path(), other_key, options);
  ASSERT_TRUE(other.ok());
  SaveMeta meta{kModelA};
  auto foreign = (*other)->Save(meta, Tokens(50, 10), "f");
  ASSERT_TRUE(foreign.ok());
  auto c = Node();
  EXPECT_EQ(c->file_count(), 0u);
  EXPECT_TRUE(fs::exists(PathOf(foreign->id)));
}

// Removes every saved cache right after it is opened for reading, as
// another node deleting it mid-read would.
class UnlinkAfterOpenEnv : public EnvWrapper {
 public:
  UnlinkAfterOpenEnv() : EnvWrapper(Env::Default()) {}
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                OpenOptions options) override {
    auto file = target()->NewRandomAccessFile(path, options);
    if (file.ok() && unlink_) target()->RemoveFile(path);
    return file;
  }
  bool unlink_ = false;
};

TEST_F(DiskSharedTest, FileDeletedByAnotherNodeMidReadLoadsWhole) {
  UnlinkAfterOpenEnv env;
  auto a = Node();
  auto b = Node(&env);
  SavedEntryInfo saved = SaveOn(a.get(), Tokens(1, 10), Payload(3000, 4));
  ASSERT_EQ(b->Refresh(true).added, 1u);
  env.unlink_ = true;
  auto loaded = b->Load(saved.id, kModelA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->payload(), Payload(3000, 4));
  EXPECT_FALSE(fs::exists(PathOf(saved.id)));
}

TEST_F(DiskSharedTest, FileDeletedByAnotherNodeBeforeTheLoadIsACleanMiss) {
  auto a = Node();
  auto b = Node();
  SavedEntryInfo saved = SaveOn(a.get(), Tokens(1, 10), Payload(3000, 4));
  ASSERT_EQ(b->Refresh(true).added, 1u);
  ASSERT_TRUE(a->Remove(saved.id).ok());
  auto loaded = b->Load(saved.id, kModelA);
  EXPECT_EQ(loaded.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(b->file_count(), 0u);
  EXPECT_FALSE(b->FindLongestPrefix(kModelA, Tokens(1, 10)).found);
}

TEST_F(DiskSharedTest, TwoNodesEnforcingAtOnceDeleteOnlyWhatIsNeeded) {
  auto a = Node();
  auto b = Node();
  const uint64_t now = Env::Default()->WallMicros();
  std::vector<SavedEntryInfo> files;
  for (int i = 0; i < 8; ++i) {
    DiskStore* writer = i % 2 == 0 ? a.get() : b.get();
    files.push_back(
        SaveOn(writer, Tokens(100 * i + 1, 10), Payload(1000, i), now - 1000000 * (8 - i)));
  }
  const DiskLimits limits{5 * files[0].file_bytes, 0};  // room for five
  a->SetLimits(limits);
  b->SetLimits(limits);
  Result<RemovalStats> ra = RemovalStats{}, rb = RemovalStats{};
  std::thread ta([&] { ra = a->EnforceLimits(now); });
  std::thread tb([&] { rb = b->EnforceLimits(now); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->files + rb->files, 3u);  // each file deleted once, by one of them
  for (int i = 0; i < 8; ++i) EXPECT_EQ(fs::exists(PathOf(files[i].id)), i >= 3) << i;
}

TEST_F(DiskSharedTest, BudgetCountsFilesTheStoreNeverIndexed) {
  auto a = Node();
  auto b = Node();
  const uint64_t now = Env::Default()->WallMicros();
  SavedEntryInfo old_a = SaveOn(a.get(), Tokens(1, 10), Payload(1000, 1), now - 2000000);
  SavedEntryInfo new_a = SaveOn(a.get(), Tokens(50, 10), Payload(1000, 2), now - 1000000);
  SavedEntryInfo b_file = SaveOn(b.get(), Tokens(90, 10), Payload(1000, 3), now);
  b->SetLimits({2 * b_file.file_bytes, 0});
  auto removed = b->EnforceLimits(now);  // b never indexed a's files
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->files, 1u);
  EXPECT_FALSE(fs::exists(PathOf(old_a.id)));
  EXPECT_TRUE(fs::exists(PathOf(new_a.id)));
  EXPECT_TRUE(fs::exists(PathOf(b_file.id)));
}

TEST_F(DiskSharedTest, LoadOnOneNodeMovesTheSharedLruOrder) {
  auto a = Node();
  auto b = Node();
  const uint64_t now = Env::Default()->WallMicros();
  SavedEntryInfo older = SaveOn(a.get(), Tokens(1, 10), Payload(1000, 1), now - 3000000);
  SavedEntryInfo newer = SaveOn(a.get(), Tokens(50, 10), Payload(1000, 2), now - 1000000);
  ASSERT_EQ(b->Refresh(true).added, 2u);
  ASSERT_TRUE(b->Load(older.id, kModelA).ok());  // b uses it: its mtime moves to now
  a->SetLimits({newer.file_bytes, 0});
  auto removed = a->EnforceLimits(Env::Default()->WallMicros());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->files, 1u);
  EXPECT_TRUE(fs::exists(PathOf(older.id)));
  EXPECT_FALSE(fs::exists(PathOf(newer.id)));
}

TEST_F(DiskSharedTest, DiskFullOnOneNodeLeavesTheFolderToTheOthers) {
  FaultEnv faulty(Env::Default());
  auto a = Node(&faulty);
  auto b = Node();
  SavedEntryInfo kept = SaveOn(b.get(), Tokens(1, 10), Payload(1000, 1));
  faulty.FailNth(FaultEnv::kAppend, 1, ENOSPC);
  SaveMeta meta{kModelA};
  auto failed = a->Save(meta, Tokens(50, 10), Payload(1000, 2));
  EXPECT_EQ(failed.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(Names(), std::vector<std::string>{CacheFileName(kept.id)});  // no temporary left
  EXPECT_EQ(a->Refresh(true).added, 1u);
  EXPECT_TRUE(a->Load(kept.id, kModelA).ok());
}

TEST_F(DiskSharedTest, FailedRenameLeavesNothingForOtherNodes) {
  FaultEnv faulty(Env::Default());
  auto a = Node(&faulty);
  auto b = Node();
  faulty.FailNth(FaultEnv::kRename, 1, EIO);
  SaveMeta meta{kModelA};
  EXPECT_EQ(a->Save(meta, Tokens(1, 10), "x").status().code(), Status::Code::kIOError);
  EXPECT_TRUE(Names().empty());
  EXPECT_EQ(b->Refresh(true).listed, 0u);
}

// Fails every read of saved caches with EIO (FaultEnv never fails reads).
class ReadErrorEnv : public EnvWrapper {
 public:
  ReadErrorEnv() : EnvWrapper(Env::Default()) {}
  class Failing : public RandomAccessFile {
   public:
    explicit Failing(std::string path) : path_(std::move(path)) {}
    Result<size_t> Read(uint64_t, size_t, char*) const override {
      return Status::IOError(path_ + ": read: Input/output error");
    }
    uint64_t size() const override { return 0; }
    const std::string& path() const override { return path_; }

   private:
    std::string path_;
  };
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                OpenOptions options) override {
    if (!fail_) return target()->NewRandomAccessFile(path, options);
    return std::unique_ptr<RandomAccessFile>(new Failing(path));
  }
  bool fail_ = false;
};

TEST_F(DiskSharedTest, ReadErrorOnOneNodeNeverDeletesTheFile) {
  ReadErrorEnv env;
  auto a = Node();
  auto b = Node(&env);
  SavedEntryInfo saved = SaveOn(a.get(), Tokens(1, 10), Payload(1000, 1));
  ASSERT_EQ(b->Refresh(true).added, 1u);
  env.fail_ = true;
  EXPECT_EQ(b->Load(saved.id, kModelA).status().code(), Status::Code::kIOError);
  EXPECT_TRUE(fs::exists(PathOf(saved.id)));
  EXPECT_TRUE(a->Load(saved.id, kModelA).ok());
}

}  // namespace
}  // namespace mx::cache
