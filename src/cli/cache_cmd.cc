// matricxon cache ls | verify | purge: the saved prompt caches of a folder
// (MATRICXON_PROMPT_CACHE_DIR or --dir).
//   ls      count, bytes and age of every saved file, from the file system:
//           nothing is decrypted, no key is needed or created.
//   verify  opens every file with the key (MATRICXON_CACHE_KEY, or the
//           folder's prompt_cache.key; never created here) and deletes the
//           ones that fail (wrong key, damaged, stale temporaries).
//   purge   deletes every saved file (not the key, not the policy).
// Run them while no server uses the folder.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache/crypto/key_store.h"
#include "cache/disk_store/disk_format.h"
#include "cache/disk_store/disk_store.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/env.h"

namespace mx::cli {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : fallback;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Age(uint64_t now_us, uint64_t then_us) {
  const uint64_t s = now_us > then_us ? (now_us - then_us) / 1000000 : 0;
  if (s < 120) return std::to_string(s) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min";
  if (s < 172800) return std::to_string(s / 3600) + " h";
  return std::to_string(s / 86400) + " d";
}

int Ls(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  if (!names.ok()) {
    std::fprintf(stderr, "matricxon cache ls: %s\n", names.status().ToString().c_str());
    return 1;
  }
  const uint64_t now = env->WallMicros();
  size_t files = 0, temporaries = 0;
  uint64_t bytes = 0;
  for (const std::string& name : *names) {
    const bool temp = EndsWith(name, cache::kTempFileSuffix);
    if (!temp && !EndsWith(name, cache::kCacheFileSuffix)) continue;
    auto info = env->GetFileInfo(JoinPath(dir, name));
    if (!info.ok()) continue;
    if (temp) {
      ++temporaries;
      continue;
    }
    ++files;
    bytes += info->size_bytes;
    std::printf("%s  %12llu bytes  %s old\n", name.c_str(), static_cast<unsigned long long>(info->size_bytes),
                Age(now, info->mtime_micros).c_str());
  }
  std::printf("%zu saved caches, %llu bytes in %s", files, static_cast<unsigned long long>(bytes), dir.c_str());
  if (temporaries > 0) std::printf(" (+%zu unfinished temporaries)", temporaries);
  std::printf("\n(not decrypted: run `matricxon cache verify` to check them with the key)\n");
  return 0;
}

int Verify(Env* env, const std::string& dir) {
  cache::KeyStoreOptions ko;
  ko.passphrase = EnvOr("MATRICXON_CACHE_KEY", "");
  const std::string cluster = EnvOr("MATRICXON_CLUSTER_NODE", "false");
  ko.cluster_node = cluster == "true" || cluster == "1";
  if (ko.passphrase.empty() && !env->FileExists(JoinPath(dir, cache::kKeyFileName))) {
    std::fprintf(stderr,
                 "matricxon cache verify: no key: %s has no %s and MATRICXON_CACHE_KEY is not set "
                 "(nothing can be checked)\n",
                 dir.c_str(), cache::kKeyFileName);
    return 1;
  }
  auto key = cache::KeyStore::Open(env, dir, ko);
  if (!key.ok() || !key->enabled()) {
    std::fprintf(stderr, "matricxon cache verify: %s\n",
                 key.ok() ? key->disabled_reason().c_str() : key.status().ToString().c_str());
    return 1;
  }
  auto store = cache::DiskStore::Open(env, dir, *key, {});
  if (!store.ok()) {
    std::fprintf(stderr, "matricxon cache verify: %s\n", store.status().ToString().c_str());
    return 1;
  }
  cache::StartupReport report = (*store)->StartupCheck();
  std::printf("%s\n", report.ToString().c_str());
  return report.errors > 0 ? 1 : 0;
}

int Purge(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  if (!names.ok()) {
    std::fprintf(stderr, "matricxon cache purge: %s\n", names.status().ToString().c_str());
    return 1;
  }
  size_t files = 0;
  uint64_t bytes = 0;
  int rc = 0;
  for (const std::string& name : *names) {
    if (!EndsWith(name, cache::kCacheFileSuffix) && !EndsWith(name, cache::kTempFileSuffix)) continue;
    const std::string path = JoinPath(dir, name);
    auto size = env->FileSize(path);
    if (Status st = env->RemoveFile(path); !st.ok()) {
      std::fprintf(stderr, "matricxon cache purge: %s\n", st.ToString().c_str());
      rc = 1;
      continue;
    }
    ++files;
    bytes += size.ok() ? *size : 0;
  }
  if (files > 0) env->SyncDir(dir);
  std::printf("deleted %zu saved caches (%llu bytes) from %s\n", files, static_cast<unsigned long long>(bytes),
              dir.c_str());
  return rc;
}

}  // namespace

int CacheCommand(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"dir", "", "the cache folder [MATRICXON_PROMPT_CACHE_DIR, default ./data/prompt_cache]"},
  };
  auto flags = Flags::Parse(specs, argc, argv, 3);
  const std::string sub = argc >= 3 ? argv[2] : "";
  if (!flags.ok() || (sub != "ls" && sub != "verify" && sub != "purge") || flags->help()) {
    const bool help = flags.ok() && flags->help();
    if (!flags.ok()) std::fprintf(stderr, "matricxon cache: %s\n", flags.status().message().c_str());
    std::fputs(Flags::Usage("cache ls|verify|purge",
                            "ls: count, bytes and age of the saved prompt caches (nothing decrypted); "
                            "verify: check every file with the key, delete failures; purge: delete them all.",
                            specs)
                   .c_str(),
               help ? stdout : stderr);
    return help ? 0 : 2;
  }
  const std::string dir =
      flags->Has("dir") ? flags->Get("dir") : EnvOr("MATRICXON_PROMPT_CACHE_DIR", "./data/prompt_cache");
  Env* env = Env::Default();
  if (sub == "ls") return Ls(env, dir);
  if (sub == "verify") return Verify(env, dir);
  return Purge(env, dir);
}

}  // namespace mx::cli
