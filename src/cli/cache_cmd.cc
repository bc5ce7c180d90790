// matricxon cache ls | verify | purge: the saved prompt caches of a folder
// (MATRICXON_PROMPT_CACHE_DIR or --dir).
//   ls      count, bytes and age of every saved file. With the key (the
//           server's: MATRICXON_CACHE_KEY, else the folder's
//           prompt_cache.key; never created here) each file is opened and
//           checked too, read-only, and ls adds its tokens, whether its model
//           fingerprint matches a model of --models-dir, and when it was
//           created and last used. Without a key: what the file system says.
//   verify  opens every file with the key and deletes the ones that fail
//           (wrong key, damaged, stale temporaries).
//   purge   deletes every saved file (not the key, not the policy).
// Only the names the store makes (32 hex digits + .mxpc / .mxpc.tmp) count,
// and only regular files are opened or deleted: a FIFO, folder or symbolic
// link with such a name is reported and skipped, never opened or followed.
// Run them while no server uses the folder.
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "cache/crypto/key_store.h"
#include "cache/disk_store/disk_format.h"
#include "cache/disk_store/disk_store.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/env.h"
#include "core/thread_pool.h"
#include "engine/saved_cache.h"
#include "models/model.h"
#include "models/sequence_state.h"

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

// The key a server on `dir` would use (MATRICXON_CACHE_KEY, else the
// folder's prompt_cache.key), never creating one. nullopt with *why when
// there is none or it cannot be used.
std::optional<cache::KeyStore> ToolKey(Env* env, const std::string& dir, std::string* why) {
  cache::KeyStoreOptions ko;
  ko.passphrase = EnvOr("MATRICXON_CACHE_KEY", "");
  const std::string cluster = EnvOr("MATRICXON_CLUSTER_NODE", "false");
  ko.cluster_node = cluster == "true" || cluster == "1";
  if (ko.passphrase.empty() && !env->FileExists(JoinPath(dir, cache::kKeyFileName))) {
    *why = "no key: " + dir + " has no " + cache::kKeyFileName + " and MATRICXON_CACHE_KEY is not set";
    return std::nullopt;
  }
  auto key = cache::KeyStore::Open(env, dir, ko);
  if (!key.ok() || !key->enabled()) {
    *why = key.ok() ? key->disabled_reason() : key.status().ToString();
    return std::nullopt;
  }
  return std::move(key).value();
}

// "2026-11-29 17:40 UTC (3 h ago)".
std::string When(uint64_t now_us, uint64_t then_us) {
  const time_t t = static_cast<time_t>(then_us / 1000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", &tm);
  return std::string(buf) + " (" + Age(now_us, then_us) + " ago)";
}

// Content fingerprints (and the F16-KV state layout) of the models in
// `models_dir`, keyed by fingerprint, to name the model a saved cache
// belongs to (and, through the layout, the KV types it was made with). Each
// file is hashed once (read from disk).
std::map<std::string, std::pair<std::string, models::StateLayout>> ModelFingerprints(
    Env* env, const std::string& models_dir) {
  std::map<std::string, std::pair<std::string, models::StateLayout>> out;
  auto names = env->ListDir(models_dir);
  if (!names.ok()) return out;
  ThreadPool pool(PhysicalCoreCount());
  for (const std::string& name : *names) {
    if (!EndsWith(name, ".gguf")) continue;
    auto model = models::Model::Load(env, JoinPath(models_dir, name), {.progress = nullptr, .prefault = false});
    if (!model.ok()) continue;
    const models::StateLayout layout =
        models::StateLayout::ForModel((*model)->config(), DType::kF16, (*model)->config().n_ctx_train);
    cache::ModelBinding b = engine::ComputeModelBinding(**model, layout, &pool);
    out[b.model_fingerprint] = {name.substr(0, name.size() - 5), layout};
  }
  return out;
}

int Ls(Env* env, const std::string& dir, const std::string& models_dir) {
  auto names = env->ListDir(dir);
  if (!names.ok()) {
    std::fprintf(stderr, "matricxon cache ls: %s\n", names.status().ToString().c_str());
    return 1;
  }
  // With the key every file is opened (read-only) for its details.
  std::string no_key;
  std::optional<cache::KeyStore> key = ToolKey(env, dir, &no_key);
  std::unique_ptr<cache::DiskStore> store;
  if (key) {
    auto opened = cache::DiskStore::Open(env, dir, *key, {});
    if (opened.ok()) {
      store = std::move(opened).value();
    } else {
      no_key = opened.status().ToString();
    }
  }
  std::map<std::string, std::pair<std::string, models::StateLayout>> models;
  if (store) models = ModelFingerprints(env, models_dir);
  std::unique_ptr<ThreadPool> pool = store ? std::make_unique<ThreadPool>(PhysicalCoreCount()) : nullptr;

  const uint64_t now = env->WallMicros();
  size_t files = 0, temporaries = 0, failing = 0, matching = 0, skipped = 0, not_ours = 0;
  uint64_t bytes = 0, tokens = 0;
  for (const std::string& name : *names) {
    std::string id;
    const cache::FileNameKind kind = cache::ClassifyFileName(name, &id);
    if (kind == cache::FileNameKind::kOther) {
      if (EndsWith(name, cache::kCacheFileSuffix) || EndsWith(name, cache::kTempFileSuffix))
        ++not_ours;
      continue;
    }
    // lstat: a symbolic link is described, not followed; a FIFO is never opened.
    auto info = env->GetLinkInfo(JoinPath(dir, name));
    if (!info.ok()) continue;
    if (!info->is_regular) {
      ++skipped;
      std::printf("%s  is %s, not a regular file; skipped\n", name.c_str(),
                  FileTypeName(info->type));
      continue;
    }
    if (kind == cache::FileNameKind::kTemp) {
      ++temporaries;
      continue;
    }
    ++files;
    bytes += info->size_bytes;
    std::printf("%s  %12llu bytes  %s old", name.c_str(), static_cast<unsigned long long>(info->size_bytes),
                Age(now, info->mtime_micros).c_str());
    if (!store) {
      std::printf("\n");
      continue;
    }
    auto entry = store->Inspect(id, pool.get());
    if (!entry.ok()) {
      ++failing;
      std::printf("  FAILS ITS CHECK: %s\n", entry.status().ToString().c_str());
      continue;
    }
    tokens += entry->n_tokens;
    std::string model;
    auto m = models.find(entry->model.model_fingerprint);
    if (m == models.end()) {
      model = "model " + entry->model.model_fingerprint.substr(0, 27) + "... (mismatch: no model in " + models_dir +
              " has this fingerprint)";
    } else if (models::StateLayout made = m->second.second;
               made.Fingerprint() == entry->model.state_layout_fingerprint) {
      ++matching;
      model = "model " + m->second.first + " (match)";
    } else if (made.KvTypesOf(entry->model.state_layout_fingerprint, &made.k_type, &made.v_type)) {
      // Loads into this model where the server runs that KV type.
      ++matching;
      model = "model " + m->second.first + " (match, KV cache type " + made.KvTypesText() + ")";
    } else {
      model = "model " + m->second.first +
              " (mismatch: another state layout, e.g. another engine version)";
    }
    std::printf("  %llu tokens  %s  created %s  last used %s\n",
                static_cast<unsigned long long>(entry->n_tokens), model.c_str(),
                When(now, entry->created_us).c_str(), When(now, entry->last_used_us).c_str());
  }
  std::printf("%zu saved caches, %llu bytes in %s", files, static_cast<unsigned long long>(bytes), dir.c_str());
  if (temporaries > 0) std::printf(" (+%zu unfinished temporaries)", temporaries);
  if (skipped > 0) std::printf(" (%zu entries that are not regular files skipped)", skipped);
  if (not_ours > 0)
    std::printf(" (%zu other files whose names the store does not make left alone)", not_ours);
  if (store) {
    std::printf("; %llu tokens; %zu match a model of %s", static_cast<unsigned long long>(tokens), matching,
                models_dir.c_str());
    if (failing > 0) std::printf("; %zu fail their check (`matricxon cache verify` deletes them)", failing);
    std::printf("\n");
  } else {
    std::printf("\n(not decrypted: tokens, model and times need the key (%s); set MATRICXON_CACHE_KEY or keep "
                "the folder's %s)\n",
                no_key.c_str(), cache::kKeyFileName);
  }
  return 0;
}

int Verify(Env* env, const std::string& dir) {
  std::string why;
  std::optional<cache::KeyStore> key = ToolKey(env, dir, &why);
  if (!key) {
    std::fprintf(stderr, "matricxon cache verify: %s (nothing can be checked)\n", why.c_str());
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
    std::string id;
    if (cache::ClassifyFileName(name, &id) == cache::FileNameKind::kOther) continue;
    const std::string path = JoinPath(dir, name);
    auto info = env->GetLinkInfo(path);
    if (!info.ok()) continue;
    if (!info->is_regular) {
      std::printf("%s  is %s, not a regular file; left alone\n", name.c_str(),
                  FileTypeName(info->type));
      continue;
    }
    if (Status st = env->RemoveFile(path); !st.ok()) {
      std::fprintf(stderr, "matricxon cache purge: %s\n", st.ToString().c_str());
      rc = 1;
      continue;
    }
    ++files;
    bytes += info->size_bytes;
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
      {"models-dir", "", "ls: models whose fingerprints saved caches are matched against "
                         "[MATRICXON_MODELS_DIR, default ./data/models]"},
  };
  auto flags = Flags::Parse(specs, argc, argv, 3);
  const std::string sub = argc >= 3 ? argv[2] : "";
  if (!flags.ok() || (sub != "ls" && sub != "verify" && sub != "purge") || flags->help()) {
    const bool help = flags.ok() && flags->help();
    if (!flags.ok()) std::fprintf(stderr, "matricxon cache: %s\n", flags.status().message().c_str());
    std::fputs(Flags::Usage("cache ls|verify|purge",
                            "ls: count, bytes and age of the saved prompt caches, and with the key (never "
                            "created here) their tokens, model match and created/last-used times; "
                            "verify: check every file with the key, delete failures; purge: delete them all.",
                            specs)
                   .c_str(),
               help ? stdout : stderr);
    return help ? 0 : 2;
  }
  const std::string dir =
      flags->Has("dir") ? flags->Get("dir") : EnvOr("MATRICXON_PROMPT_CACHE_DIR", "./data/prompt_cache");
  Env* env = Env::Default();
  const std::string models_dir =
      flags->Has("models-dir") ? flags->Get("models-dir") : EnvOr("MATRICXON_MODELS_DIR", "./data/models");
  if (sub == "ls") return Ls(env, dir, models_dir);
  if (sub == "verify") return Verify(env, dir);
  return Purge(env, dir);
}

}  // namespace mx::cli
