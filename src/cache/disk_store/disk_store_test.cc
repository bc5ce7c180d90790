// Disk store behaviour, one edge case per test. Fault injection (disk full,
// crashes) is in disk_fault_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "cache/disk_store/disk_test_util.h"

namespace mx::cache {
namespace {

namespace fs = std::filesystem;
using testing_support::FlipByte;
using testing_support::ReadBytes;
using testing_support::TruncateTo;
using testing_support::WriteBytes;

class DiskStoreTest : public DiskStoreTestBase {};

TEST_F(DiskStoreTest, SavedEntryLoadsBackExactly) {
  auto tokens = Tokens(100, 300);
  auto payload = Payload(5000, 1);
  SavedEntryInfo info = SaveOk(tokens, payload);
  EXPECT_EQ(info.id.size(), 32u);
  EXPECT_EQ(info.n_tokens, 300u);
  EXPECT_EQ(info.payload_bytes, 5000u);
  EXPECT_EQ(info.file_bytes, fs::file_size(PathOf(info.id)));
  auto loaded = store_->Load(info.id, kModelA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tokens, tokens);
  EXPECT_EQ(loaded->payload(), payload);
  EXPECT_EQ(loaded->info.model, kModelA);
}

// The record keeps the prompt length (format version 2), and a context
// shift from disk only takes a file whose chat the prompt trimmed (it keeps
// the file's latest messages), never a chat matched in the middle.
TEST_F(DiskStoreTest, ShiftFromDiskOnlyForATrimThatKeepsTheLatestMessages) {
  std::vector<int32_t> chat = Tokens(0, 10);  // system, three messages, a reply
  for (int32_t start : {100, 200, 300}) {
    auto m = Tokens(start, 40);
    chat.insert(chat.end(), m.begin(), m.end());
  }
  auto reply = Tokens(400, 10);
  chat.insert(chat.end(), reply.begin(), reply.end());
  auto info = store_->Save({kModelA, 0, 0, chat.size() - reply.size()}, chat, Payload(100, 1));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->prompt_len, chat.size() - reply.size());
  std::vector<int32_t> other = Tokens(0, 10);  // system, the second message, its own question
  auto second = Tokens(200, 40);
  other.insert(other.end(), second.begin(), second.end());
  other.push_back(-9);
  EXPECT_FALSE(store_->FindShift(kModelA, other, 16).found);
  std::vector<int32_t> trimmed = Tokens(0, 10);  // the first message dropped
  trimmed.insert(trimmed.end(), chat.begin() + 50, chat.end());
  trimmed.push_back(-9);
  ShiftMatch m = store_->FindShift(kModelA, trimmed, 16);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.plan.drop_begin, 10);
  EXPECT_EQ(m.plan.drop_end, 50);
  // And the prompt length survives a restart (the start-up check reads it).
  auto reopened = OpenStore(Env::Default(), key_);
  reopened->StartupCheck();
  auto list = reopened->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].prompt_len, chat.size() - reply.size());
}

TEST_F(DiskStoreTest, SavedFileHasMode0600AndTheFolder0700) {
  SavedEntryInfo info = SaveOk(Tokens(1, 5), Payload(10, 1));
  struct stat st;
  ASSERT_EQ(::stat(PathOf(info.id).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto fresh = DiskStore::Open(Env::Default(), dir_.Sub("new/cache"), key_, {});
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(::stat(dir_.Sub("new/cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(DiskStoreTest, ParallelSaveAndLoadRoundTrip) {
  ThreadPool pool(4);
  auto tokens = Tokens(7, 2000);
  auto payload = Payload(200000, 2);  // ~800 chunks of 256 bytes
  SaveMeta meta;
  meta.model = kModelA;
  auto info = store_->Save(meta, tokens, payload, &pool);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto loaded = store_->Load(info->id, kModelA, &pool);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tokens, tokens);
  EXPECT_EQ(loaded->payload(), payload);
  // Sequential load of the parallel-sealed file agrees.
  auto again = store_->Load(info->id, kModelA);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->payload(), payload);
}

// Splits `n` bytes into buffers of odd sizes (one of them empty).
std::vector<std::vector<uint8_t>> OddBuffers(size_t n) {
  std::vector<std::vector<uint8_t>> out;
  const size_t sizes[] = {1, 0, 255, 257, 1000, 3};
  for (size_t i = 0; n > 0; ++i) {
    const size_t len = std::min(n, sizes[i % std::size(sizes)]);
    out.emplace_back(len, 0xee);
    n -= len;
  }
  out.emplace_back(0, 0);
  return out;
}

TEST_F(DiskStoreTest, LoadIntoPutsThePayloadInTheCallersBuffers) {
  ThreadPool pool(3);
  auto tokens = Tokens(9, 130);
  auto payload = Payload(7001, 3);  // metadata and payload share chunk 2
  SavedEntryInfo info = SaveOk(tokens, payload);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    auto buffers = OddBuffers(payload.size());
    uint64_t asked = 0;
    auto place = [&](const SavedEntryInfo& entry, uint64_t bytes) -> Result<std::vector<std::span<uint8_t>>> {
      EXPECT_EQ(entry.id, info.id);
      asked = bytes;
      std::vector<std::span<uint8_t>> spans;
      for (auto& b : buffers) spans.emplace_back(b.data(), b.size());
      return spans;
    };
    auto loaded = store_->LoadInto(info.id, kModelA, p, place);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(asked, payload.size());
    EXPECT_EQ(loaded->tokens, tokens);
    EXPECT_EQ(loaded->plaintext, nullptr);
    std::string joined;
    for (const auto& b : buffers) joined.append(b.begin(), b.end());
    EXPECT_TRUE(joined == payload);
  }
}

TEST_F(DiskStoreTest, SaveFromSeveralBuffersEqualsOneBuffer) {
  ThreadPool pool(2);
  auto payload = Payload(3000, 4);
  auto buffers = OddBuffers(payload.size());
  size_t at = 0;
  std::vector<std::span<const uint8_t>> parts;
  for (auto& b : buffers) {
    if (!b.empty()) std::memcpy(b.data(), payload.data() + at, b.size());
    at += b.size();
    parts.emplace_back(b.data(), b.size());
  }
  SaveMeta meta;
  meta.model = kModelA;
  auto info = store_->Save(meta, Tokens(1, 40), parts, &pool);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->payload_bytes, payload.size());
  auto loaded = store_->Load(info->id, kModelA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->payload(), payload);
}

TEST_F(DiskStoreTest, LoadIntoFlippedByteIsCorruptionAndDeletesTheFile) {
  SavedEntryInfo info = SaveOk(Tokens(1, 10), Payload(2000, 6));
  FlipByte(PathOf(info.id), info.file_bytes - 300);
  std::vector<uint8_t> buf(2000);
  auto place = [&](const SavedEntryInfo&, uint64_t) -> Result<std::vector<std::span<uint8_t>>> {
    return std::vector<std::span<uint8_t>>{{buf.data(), buf.size()}};
  };
  auto loaded = store_->LoadInto(info.id, kModelA, nullptr, place);
  EXPECT_EQ(loaded.status().code(), Status::Code::kCorruption);
  EXPECT_NE(loaded.status().message().find("AEAD tag mismatch"), std::string::npos) << loaded.status().ToString();
  EXPECT_FALSE(fs::exists(PathOf(info.id)));
  EXPECT_TRUE(store_->List().empty());
}

TEST_F(DiskStoreTest, LoadIntoRefusedByThePlacerKeepsTheFile) {
  SavedEntryInfo info = SaveOk(Tokens(1, 10), Payload(500, 2));
  auto refuse = [](const SavedEntryInfo&, uint64_t) -> Result<std::vector<std::span<uint8_t>>> {
    return Status::InvalidArgument("too long for this context");
  };
  EXPECT_EQ(store_->LoadInto(info.id, kModelA, nullptr, refuse).status().code(), Status::Code::kInvalidArgument);
  std::vector<uint8_t> small(10);
  auto wrong = [&](const SavedEntryInfo&, uint64_t) -> Result<std::vector<std::span<uint8_t>>> {
    return std::vector<std::span<uint8_t>>{{small.data(), small.size()}};
  };
  EXPECT_EQ(store_->LoadInto(info.id, kModelA, nullptr, wrong).status().code(), Status::Code::kInternal);
  EXPECT_TRUE(fs::exists(PathOf(info.id)));
  EXPECT_EQ(store_->List().size(), 1u);
  EXPECT_EQ(store_->LoadInto("00112233445566778899aabbccddeeff", kModelA, nullptr, refuse).status().code(),
            Status::Code::kNotFound);
}

TEST_F(DiskStoreTest, EmptyPayloadAndNoTokensRoundTrip) {
  SavedEntryInfo info = SaveOk({}, "");
  auto loaded = store_->Load(info.id, kModelA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->tokens.empty());
  EXPECT_TRUE(loaded->payload().empty());
}

TEST_F(DiskStoreTest, ReopenedStoreReturnsNothingUntilChecked) {
  SavedEntryInfo info = SaveOk(Tokens(1, 50), Payload(700, 3));
  auto store = OpenStore(Env::Default(), key_);
  EXPECT_TRUE(store->List().empty());
  EXPECT_FALSE(store->checked());
  PrefixMatch m = store->FindLongestPrefix(kModelA, Tokens(1, 60));
  EXPECT_FALSE(m.found);
  EXPECT_EQ(m.why_none, "the disk cache is still being checked");
  EXPECT_EQ(store->Load(info.id, kModelA).status().code(), Status::Code::kNotFound);

  StartupReport report = store->StartupCheck();
  EXPECT_EQ(report.files_ok, 1u);
  EXPECT_EQ(report.bytes_ok, info.file_bytes);
  EXPECT_TRUE(store->checked());
  m = store->FindLongestPrefix(kModelA, Tokens(1, 60));
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.entry.id, info.id);
  EXPECT_EQ(m.common_prefix, 50u);
  auto loaded = store->Load(info.id, kModelA);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->payload(), Payload(700, 3));
}

TEST_F(DiskStoreTest, StartupCheckIndexesMetadataSpanningManyChunks) {
  // 1000 tokens = 4 KB of metadata = 16 chunks of 256 bytes, checked in
  // batches of 3 on a pool and sequentially.
  auto tokens = Tokens(40, 1000);
  SavedEntryInfo info = SaveOk(tokens, Payload(10000, 20));
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    auto store = OpenStore(Env::Default(), key_);
    StartupReport report = store->StartupCheck(&pool);
    EXPECT_EQ(report.files_ok, 1u);
    auto listed = store->List();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].n_tokens, 1000u);
    EXPECT_EQ(listed[0].tokens_hash, HashTokens(tokens));
    EXPECT_EQ(listed[0].payload_bytes, 10000u);
    EXPECT_EQ(listed[0].created_us, info.created_us);
    PrefixMatch m = store->FindLongestPrefix(kModelA, tokens);
    ASSERT_TRUE(m.found);
    EXPECT_EQ(m.common_prefix, 1000u);
  }
}

TEST_F(DiskStoreTest, FindPicksTheLongestSharedStart) {
  auto a = Tokens(1, 100);
  auto b = Tokens(1, 40);
  b.push_back(999);
  SavedEntryInfo ia = SaveOk(a, "a");
  SaveOk(b, "b");
  auto prompt = Tokens(1, 80);
  prompt.push_back(5);
  PrefixMatch m = store_->FindLongestPrefix(kModelA, prompt);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.entry.id, ia.id);
  EXPECT_EQ(m.common_prefix, 80u);
}

TEST_F(DiskStoreTest, FindBreaksTiesByMostRecentUse) {
  SaveOk(Tokens(1, 30), "old", kModelA, 1000);
  SavedEntryInfo recent = SaveOk(Tokens(1, 30), "new", kModelA, 2000);
  PrefixMatch m = store_->FindLongestPrefix(kModelA, Tokens(1, 30));
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.entry.id, recent.id);
}

TEST_F(DiskStoreTest, FindSaysEmptyOrNoSharedStart) {
  StartupReport report = store_->StartupCheck();
  EXPECT_EQ(report.files_ok, 0u);
  EXPECT_EQ(store_->FindLongestPrefix(kModelA, Tokens(1, 5)).why_none, "the disk cache is empty");
  SaveOk(Tokens(500, 5), "x");
  PrefixMatch m = store_->FindLongestPrefix(kModelA, Tokens(1, 5));
  EXPECT_FALSE(m.found);
  EXPECT_EQ(m.why_none, "no saved cache shares a start with this prompt");
}

TEST_F(DiskStoreTest, EntryOfAnotherModelIsNeverReturned) {
  SavedEntryInfo info = SaveOk(Tokens(1, 20), "state", kModelA);
  PrefixMatch m = store_->FindLongestPrefix(kModelB, Tokens(1, 20));
  EXPECT_FALSE(m.found);
  EXPECT_TRUE(m.other_model);
  EXPECT_EQ(m.why_none, "the saved cache was made by another model");
  EXPECT_EQ(m.other_layout_fingerprint, 0u);  // another model file
  EXPECT_EQ(store_->Load(info.id, kModelB).status().code(), Status::Code::kInvalidArgument);
  // Same file, other engine state layout (e.g. another KV type): another
  // model too, and the match names the file's layout for the log.
  ModelBinding other_layout = kModelA;
  other_layout.state_layout_fingerprint ^= 1;
  const PrefixMatch o = store_->FindLongestPrefix(other_layout, Tokens(1, 20));
  EXPECT_FALSE(o.found);
  EXPECT_TRUE(o.other_model);
  EXPECT_EQ(o.other_layout_fingerprint, kModelA.state_layout_fingerprint);
  EXPECT_EQ(store_->Load(info.id, other_layout).status().code(), Status::Code::kInvalidArgument);
  // Files of another model are kept (their model may be loaded later).
  EXPECT_TRUE(fs::exists(PathOf(info.id)));
}

TEST_F(DiskStoreTest, LoadMarksTheEntryUsed) {
  SavedEntryInfo info = SaveOk(Tokens(1, 3), "p", kModelA, 1000);
  ASSERT_TRUE(store_->Load(info.id, kModelA).ok());
  ASSERT_EQ(store_->List().size(), 1u);
  EXPECT_GT(store_->List()[0].last_used_us, 1000u);
}

TEST_F(DiskStoreTest, NoFileHoldsTokensPayloadOrModelInTheClear) {
  // Distinctive token run and payload pattern.
  std::vector<int32_t> tokens;
  for (int i = 0; i < 64; ++i) tokens.push_back(0x5eed0000 + i);
  std::string payload;
  while (payload.size() < 4000) payload += "MATRICXON-PLAINTEXT-PAYLOAD-PATTERN|";
  SavedEntryInfo info = SaveOk(tokens, payload);
  const std::string bytes = ReadBytes(PathOf(info.id));
  std::string token_bytes(reinterpret_cast<const char*>(tokens.data()), 8 * sizeof(int32_t));
  EXPECT_EQ(bytes.find(token_bytes), std::string::npos);
  EXPECT_EQ(bytes.find("MATRICXON-PLAINTEXT"), std::string::npos);
  EXPECT_EQ(bytes.find(kModelA.model_fingerprint), std::string::npos);
  EXPECT_EQ(bytes.find("aaaaaaaa"), std::string::npos);
}

// Saves a file, lets `damage` change it, and expects a fresh store's
// StartupCheck to delete it.
StartupReport CheckDamaged(DiskStoreTestBase* t, const std::string& path) {
  auto store = t->OpenStore(Env::Default(), t->key_);
  StartupReport r = store->StartupCheck();
  EXPECT_EQ(r.files_ok, 0u) << path;
  EXPECT_TRUE(store->List().empty());
  EXPECT_FALSE(fs::exists(path)) << path;
  return r;
}

TEST_F(DiskStoreTest, AnyFlippedHeaderByteIsRejectedAtStartup) {
  SavedEntryInfo info = SaveOk(Tokens(1, 30), Payload(600, 4));
  const std::string path = PathOf(info.id);
  const std::string pristine = ReadBytes(path);
  for (size_t off = 0; off < kDiskHeaderBytes; ++off) {
    WriteBytes(path, pristine);
    FlipByte(path, off, 0x04);
    StartupReport r = CheckDamaged(this, path);
    if (off >= 4 && off < 8) {
      EXPECT_EQ(r.removed_unsupported, 1u) << off;
    } else if (off >= 8 && off < 16) {
      EXPECT_EQ(r.removed_other_key, 1u) << off;
    } else {
      EXPECT_EQ(r.removed_damaged, 1u) << off;
    }
  }
}

TEST_F(DiskStoreTest, FlippedMetadataByteFailsLoadAndDeletesTheFile) {
  SavedEntryInfo info = SaveOk(Tokens(1, 30), Payload(600, 5));
  FlipByte(PathOf(info.id), kDiskHeaderBytes + 2);  // the model fingerprint length
  auto loaded = store_->Load(info.id, kModelA);
  EXPECT_EQ(loaded.status().code(), Status::Code::kCorruption);
  EXPECT_NE(loaded.status().message().find("chunk 0"), std::string::npos)
      << loaded.status().ToString();
  EXPECT_FALSE(fs::exists(PathOf(info.id)));
  EXPECT_TRUE(store_->List().empty());
  EXPECT_FALSE(store_->FindLongestPrefix(kModelA, Tokens(1, 30)).found);
}

TEST_F(DiskStoreTest, FlippedByteInAnyChunkOrTagFailsLoad) {
  const std::string payload = Payload(2000, 6);
  for (int chunk = 0;; ++chunk) {
    for (bool in_tag : {false, true}) {
      SavedEntryInfo info = SaveOk(Tokens(1, 10), payload);
      const uint64_t n_chunks = (info.file_bytes - kDiskHeaderBytes + kChunk + kTagBytes - 1) /
                                (kChunk + kTagBytes);
      if (static_cast<uint64_t>(chunk) >= n_chunks) return;
      const uint64_t start = kDiskHeaderBytes + uint64_t(chunk) * (kChunk + kTagBytes);
      const uint64_t end = std::min<uint64_t>(start + kChunk + kTagBytes, info.file_bytes);
      FlipByte(PathOf(info.id), in_tag ? end - 3 : start + 5, 0x80);
      auto loaded = store_->Load(info.id, kModelA);
      ASSERT_EQ(loaded.status().code(), Status::Code::kCorruption) << chunk << " " << in_tag;
      EXPECT_NE(loaded.status().message().find("chunk " + std::to_string(chunk)),
                std::string::npos)
          << loaded.status().ToString();
      EXPECT_FALSE(fs::exists(PathOf(info.id)));
    }
  }
}

TEST_F(DiskStoreTest, FlippedChunkByteIsRejectedAtStartup) {
  SavedEntryInfo info = SaveOk(Tokens(1, 10), Payload(2000, 7));
  FlipByte(PathOf(info.id), info.file_bytes / 2);
  EXPECT_EQ(CheckDamaged(this, PathOf(info.id)).removed_damaged, 1u);
}

TEST_F(DiskStoreTest, TruncatedFilesAreRejected) {
  const std::string payload = Payload(1500, 8);
  const uint64_t stride = kChunk + kTagBytes;
  SavedEntryInfo probe = SaveOk(Tokens(1, 10), payload);
  const uint64_t size = probe.file_bytes;
  ASSERT_TRUE(store_->Remove(probe.id).ok());
  const std::vector<uint64_t> cuts = {0,          1,          kDiskHeaderBytes - 1, kDiskHeaderBytes,
                                      kDiskHeaderBytes + 16,  kDiskHeaderBytes + stride,  // chunk boundary
                                      kDiskHeaderBytes + 2 * stride,                      // chunk boundary
                                      kDiskHeaderBytes + stride + 100, size - kTagBytes, size - 1};
  for (uint64_t cut : cuts) {
    ASSERT_LT(cut, size);
    SavedEntryInfo info = SaveOk(Tokens(1, 10), payload);
    TruncateTo(PathOf(info.id), cut);
    Status st = store_->Load(info.id, kModelA).status();
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << cut;
    if (cut > kDiskHeaderBytes && (cut - kDiskHeaderBytes) % stride == 0) {
      // Whole chunks remain: the new last chunk was sealed as "not last".
      EXPECT_NE(st.message().find("AEAD tag mismatch"), std::string::npos) << st.ToString();
    }
    EXPECT_FALSE(fs::exists(PathOf(info.id))) << cut;
    // And the same cut found at start-up.
    SavedEntryInfo again = SaveOk(Tokens(1, 10), payload);
    TruncateTo(PathOf(again.id), cut);
    EXPECT_EQ(CheckDamaged(this, PathOf(again.id)).removed_damaged, 1u) << cut;
    store_->Remove(again.id);
  }
}

TEST_F(DiskStoreTest, ChunksSwappedBetweenFilesFail) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(1500, 9));
  SavedEntryInfo b = SaveOk(Tokens(1, 10), Payload(1500, 10));
  ASSERT_EQ(a.file_bytes, b.file_bytes);
  std::string fa = ReadBytes(PathOf(a.id));
  const std::string fb = ReadBytes(PathOf(b.id));
  const size_t stride = kChunk + kTagBytes;
  const size_t at = kDiskHeaderBytes + stride;  // chunk 1
  fa.replace(at, stride, fb.substr(at, stride));
  WriteBytes(PathOf(a.id), fa);
  EXPECT_EQ(store_->Load(a.id, kModelA).status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(store_->Load(b.id, kModelA).ok());
}

TEST_F(DiskStoreTest, ChunksReorderedWithinAFileFail) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(1500, 11));
  std::string f = ReadBytes(PathOf(a.id));
  const size_t stride = kChunk + kTagBytes;
  const std::string c1 = f.substr(kDiskHeaderBytes + stride, stride);
  const std::string c2 = f.substr(kDiskHeaderBytes + 2 * stride, stride);
  f.replace(kDiskHeaderBytes + stride, stride, c2);
  f.replace(kDiskHeaderBytes + 2 * stride, stride, c1);
  WriteBytes(PathOf(a.id), f);
  EXPECT_EQ(store_->Load(a.id, kModelA).status().code(), Status::Code::kCorruption);
}

TEST_F(DiskStoreTest, RenamedFileIsRejected) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(500, 12));
  const std::string renamed = dir_.Sub(CacheFileName(std::string(32, 'c')));
  fs::rename(PathOf(a.id), renamed);
  StartupReport r = CheckDamaged(this, renamed);
  EXPECT_EQ(r.removed_damaged, 1u);
}

TEST_F(DiskStoreTest, FileFromAnotherKeyIsDeletedAtStartup) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), Payload(500, 13));
  KeyStore other = KeyStore::FromKey(TestKey(2), KeySource::kGenerated);
  auto store = OpenStore(Env::Default(), other);
  StartupReport r = store->StartupCheck();
  EXPECT_EQ(r.removed_other_key, 1u);
  EXPECT_EQ(r.files_ok, 0u);
  EXPECT_FALSE(fs::exists(PathOf(a.id)));
}

TEST_F(DiskStoreTest, JunkAndStaleTemporariesAreCleanedUnknownNamesLeftAlone) {
  const std::string junk1 = dir_.Sub(CacheFileName(std::string(32, '1')));
  const std::string junk2 = dir_.Sub(CacheFileName(std::string(32, '2')));
  const std::string temp = dir_.Sub(TempFileName(std::string(32, '3')));
  WriteBytes(junk1, Payload(3000, 14));
  WriteBytes(junk2, "");
  WriteBytes(temp, Payload(100, 15));
  WriteBytes(dir_.Sub("notes.txt"), "keep me");
  WriteBytes(dir_.Sub(kKeyFileName), std::string(32, 'k'));
  WriteBytes(dir_.Sub("prompt_cache_policy.json"), "{}");
  SavedEntryInfo good = SaveOk(Tokens(1, 10), Payload(500, 16));

  StartupReport r;
  auto store = Reopen(&r);
  EXPECT_EQ(r.files_ok, 1u);
  EXPECT_EQ(r.removed_damaged, 2u);
  EXPECT_EQ(r.removed_temporaries, 1u);
  EXPECT_EQ(r.ignored, 1u);
  EXPECT_EQ(r.removed_bytes, 3100u);
  EXPECT_NE(r.ToString().find("1 saved caches ok"), std::string::npos) << r.ToString();
  EXPECT_EQ(Names(), (std::vector<std::string>{CacheFileName(good.id), "notes.txt", kKeyFileName,
                                               "prompt_cache_policy.json"}));
}

TEST_F(DiskStoreTest, FileDeletedBehindTheStoresBackIsNotFoundAndUnindexed) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), "a");
  fs::remove(PathOf(a.id));
  EXPECT_EQ(store_->Load(a.id, kModelA).status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(store_->List().empty());
  EXPECT_FALSE(store_->FindLongestPrefix(kModelA, Tokens(1, 10)).found);
}

TEST_F(DiskStoreTest, RemoveDeletesOneFile) {
  SavedEntryInfo a = SaveOk(Tokens(1, 10), "a");
  SavedEntryInfo b = SaveOk(Tokens(1, 10), "b");
  ASSERT_TRUE(store_->Remove(a.id).ok());
  EXPECT_FALSE(fs::exists(PathOf(a.id)));
  ASSERT_EQ(store_->List().size(), 1u);
  EXPECT_EQ(store_->List()[0].id, b.id);
  EXPECT_EQ(store_->Remove(a.id).code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->Load(a.id, kModelA).status().code(), Status::Code::kNotFound);
}

TEST_F(DiskStoreTest, PurgeDeletesEverySavedFileButNotTheKeyOrPolicy) {
  WriteBytes(dir_.Sub(kKeyFileName), std::string(32, 'k'));
  WriteBytes(dir_.Sub("prompt_cache_policy.json"), "{}");
  SavedEntryInfo a = SaveOk(Tokens(1, 10), "a");
  SavedEntryInfo b = SaveOk(Tokens(1, 20), "bb");
  auto stats = store_->Purge();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(stats->bytes, a.file_bytes + b.file_bytes);
  EXPECT_TRUE(store_->List().empty());
  EXPECT_EQ(store_->used_bytes(), 0u);
  EXPECT_EQ(Names(), (std::vector<std::string>{kKeyFileName, "prompt_cache_policy.json"}));
}

TEST_F(DiskStoreTest, OverBudgetRemovesTheOldestFiles) {
  SavedEntryInfo oldest = SaveOk(Tokens(1, 10), Payload(1000, 1), kModelA, 1000);
  SavedEntryInfo mid = SaveOk(Tokens(1, 10), Payload(1000, 2), kModelA, 2000);
  SavedEntryInfo newest = SaveOk(Tokens(1, 10), Payload(1000, 3), kModelA, 3000);
  EXPECT_EQ(store_->used_bytes(), 3 * oldest.file_bytes);
  store_->SetLimits({2 * oldest.file_bytes, 0});
  auto stats = store_->EnforceLimits(4000);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 1u);
  EXPECT_FALSE(fs::exists(PathOf(oldest.id)));
  EXPECT_TRUE(fs::exists(PathOf(mid.id)));
  EXPECT_TRUE(fs::exists(PathOf(newest.id)));
  EXPECT_EQ(store_->file_count(), 2u);
}

TEST_F(DiskStoreTest, ExpiredFilesAreRemoved) {
  const uint64_t hour = uint64_t{3600} * 1000000;
  SavedEntryInfo stale = SaveOk(Tokens(1, 10), "s", kModelA, 1 * hour);
  SavedEntryInfo fresh = SaveOk(Tokens(1, 10), "f", kModelA, 100 * hour);
  store_->SetLimits({uint64_t{1} << 30, 24 * hour});
  auto stats = store_->EnforceLimits(101 * hour);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->bytes, stale.file_bytes);
  EXPECT_FALSE(fs::exists(PathOf(stale.id)));
  EXPECT_TRUE(fs::exists(PathOf(fresh.id)));
}

TEST_F(DiskStoreTest, FileLargerThanTheBudgetIsNotWritten) {
  store_->SetLimits({1000, 0});
  SaveMeta meta{kModelA};
  auto r = store_->Save(meta, Tokens(1, 10), Payload(5000, 1));
  EXPECT_EQ(r.status().code(), Status::Code::kResourceExhausted);
  EXPECT_TRUE(Names().empty());
}

TEST_F(DiskStoreTest, BadModelFingerprintIsInvalidArgument) {
  SaveMeta meta;
  meta.model = {"", 1};
  EXPECT_EQ(store_->Save(meta, Tokens(1, 3), "x").status().code(), Status::Code::kInvalidArgument);
  meta.model = {std::string(kMaxModelFingerprintBytes + 1, 'f'), 1};
  EXPECT_EQ(store_->Save(meta, Tokens(1, 3), "x").status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Names().empty());
}

TEST_F(DiskStoreTest, OpenRefusesAStoreWithoutKey) {
  auto off = KeyStore::Open(Env::Default(), dir_.path(), {"", true});
  ASSERT_TRUE(off.ok());
  auto store = DiskStore::Open(Env::Default(), dir_.path(), off.value(), {});
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(store.status().message().find("cluster node"), std::string::npos);
}

TEST_F(DiskStoreTest, BackgroundStartupCheckNeverTouchesFilesBeingSaved) {
  std::vector<std::string> before;
  for (int i = 0; i < 10; ++i) before.push_back(SaveOk(Tokens(i * 100, 30), Payload(3000, i)).id);
  auto store = OpenStore(Env::Default(), key_);
  std::vector<std::string> during;
  std::thread checker([&] { store->StartupCheck(); });
  SaveMeta meta{kModelA};
  for (int i = 0; i < 10; ++i) {
    auto r = store->Save(meta, Tokens(5000 + i, 30), Payload(3000, 100 + i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    during.push_back(r->id);
  }
  checker.join();
  EXPECT_TRUE(store->checked());
  EXPECT_EQ(store->file_count(), 20u);
  for (const auto& id : before) EXPECT_TRUE(store->Load(id, kModelA).ok()) << id;
  for (const auto& id : during) EXPECT_TRUE(store->Load(id, kModelA).ok()) << id;
}

TEST(DiskFormatTest, FileNamesAreClassified) {
  std::string id;
  EXPECT_EQ(ClassifyFileName(std::string(32, 'a') + ".mxpc", &id), FileNameKind::kCache);
  EXPECT_EQ(id, std::string(32, 'a'));
  EXPECT_EQ(ClassifyFileName(std::string(32, '0') + ".mxpc.tmp", &id), FileNameKind::kTemp);
  EXPECT_EQ(ClassifyFileName(std::string(32, 'A') + ".mxpc", &id), FileNameKind::kOther);
  EXPECT_EQ(ClassifyFileName(std::string(31, 'a') + ".mxpc", &id), FileNameKind::kOther);
  EXPECT_EQ(ClassifyFileName("prompt_cache.key", &id), FileNameKind::kOther);
}

TEST(DiskFormatTest, LayoutMatchesTheDocumentedWorkedExample) {
  // docs/disk_cache_format.md: 94 metadata bytes + 10 264 payload bytes.
  RecordMeta meta;
  meta.model_fingerprint = "sha256-64:9c1e22aa0b7d4f60";
  meta.layout_fingerprint = 1, meta.created_us = 2, meta.last_used_us = 3;
  std::vector<int32_t> tokens = {1, 15043, 29892};
  EXPECT_EQ(EncodeMetadata(meta, tokens, 10264).size(), 94u);
  EXPECT_EQ(MetadataBytesFor(meta.model_fingerprint.size(), 0, tokens.size()), 94u);
  EXPECT_EQ(SealedFileBytes(94 + 10264, kDefaultChunkBytes), 10438u);
  EXPECT_EQ(SealedFileBytes(94388334, kDefaultChunkBytes), 94388766u);
  auto layout = LayoutForFileSize(94388766, kDefaultChunkBytes);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->n_chunks, 23u);
  EXPECT_EQ(layout->last_chunk_bytes, 2113646u);
  // A tenant adds its bytes and round-trips.
  meta.tenant = "acme/u1";
  const std::string enc = EncodeMetadata(meta, tokens, 0);
  EXPECT_EQ(enc.size(), MetadataBytesFor(meta.model_fingerprint.size(), 7, tokens.size()));
  RecordMeta back;
  std::vector<int32_t> back_tokens;
  size_t offset = 0;
  ASSERT_TRUE(ParseRecord(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(enc.data()), enc.size()),
                          &back, &back_tokens, &offset)
                  .ok());
  EXPECT_EQ(back.tenant, "acme/u1");
  EXPECT_EQ(back_tokens, tokens);
}

}  // namespace
}  // namespace mx::cache
