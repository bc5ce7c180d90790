// Shared fixture for the disk store tests (test-only).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/disk_store/disk_store.h"
#include "scratch_dir.h"

namespace mx::cache {

inline SecretKey TestKey(uint8_t fill) {
  std::array<uint8_t, kKeyBytes> b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(fill + 31 * i);
  return SecretKey(b);
}

inline const ModelBinding kModelA{"gguf-fnv64:aaaaaaaaaaaaaaaa", 0x1111};
inline const ModelBinding kModelB{"gguf-fnv64:bbbbbbbbbbbbbbbb", 0x1111};

// Tokens start, start+1, ... (n of them).
inline std::vector<int32_t> Tokens(int32_t start, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = start + static_cast<int32_t>(i);
  return t;
}

// A payload with a recognisable, seed-dependent pattern.
inline std::string Payload(size_t n, uint32_t seed) {
  std::string p(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<char>(x >> 24);
  }
  return p;
}

class DiskStoreTestBase : public ::testing::Test {
 public:
  static constexpr uint32_t kChunk = 256;

  DiskStoreTestBase() : dir_("disk"), key_(KeyStore::FromKey(TestKey(1), KeySource::kGenerated)) {}

  void SetUp() override { store_ = OpenStore(Env::Default(), key_); }

  std::unique_ptr<DiskStore> OpenStore(Env* env, const KeyStore& key,
                                       DiskLimits limits = DiskLimits{}) {
    DiskStoreOptions options;
    options.chunk_bytes = kChunk;
    options.limits = limits;
    auto store = DiskStore::Open(env, dir_.path(), key, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // A fresh store over the same folder, checked.
  std::unique_ptr<DiskStore> Reopen(StartupReport* report = nullptr) {
    auto store = OpenStore(Env::Default(), key_);
    StartupReport r = store->StartupCheck();
    if (report != nullptr) *report = r;
    return store;
  }

  SavedEntryInfo SaveOk(const std::vector<int32_t>& tokens, const std::string& payload,
                        const ModelBinding& model = kModelA, uint64_t last_used_us = 0) {
    SaveMeta meta;
    meta.model = model;
    meta.last_used_us = last_used_us;
    meta.created_us = last_used_us;
    auto info = store_->Save(meta, tokens, payload);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info.value() : SavedEntryInfo{};
  }

  std::string PathOf(const std::string& id) const { return dir_.Sub(CacheFileName(id)); }

  // Names in the folder, sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  testing_support::ScratchDir dir_;
  KeyStore key_;
  std::unique_ptr<DiskStore> store_;
};

}  // namespace mx::cache
