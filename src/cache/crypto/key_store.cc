#include "cache/crypto/key_store.h"

#include <openssl/crypto.h>

#include <cstdio>
#include <cstring>

#include "core/logging.h"

namespace mx::cache {
namespace {

std::string ModeString(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", mode & 07777);
  return buf;
}

// Reads and checks an existing key file. `retry` is set when the file is
// shorter than a key, which is what a concurrent creator's file looks like
// for a moment.
Result<SecretKey> ReadKeyFile(Env* env, const std::string& path, const FileInfo& info,
                              bool* retry) {
  *retry = false;
  if (!info.is_regular) {
    return Status::InvalidArgument("key file " + path + " is " + FileTypeName(info.type) +
                                   ", not a regular file; refused");
  }
  if (info.owner_uid != env->EffectiveUid()) {
    return Status::InvalidArgument("key file " + path + " is owned by uid " +
                                   std::to_string(info.owner_uid) + ", not by this user (uid " +
                                   std::to_string(env->EffectiveUid()) +
                                   "); refused: anyone could have put their own key there");
  }
  if ((info.mode & 077) != 0) {
    return Status::InvalidArgument("key file " + path + " has mode " + ModeString(info.mode) +
                                   ": it must not be readable by group or others (chmod 600 " +
                                   path + ")");
  }
  // Not following a symbolic link: one swapped in after the check above is
  // refused here too.
  MX_ASSIGN_OR_RETURN(std::string bytes,
                      ReadSmallFile(env, path, {.follow_symlinks = false}, 64 * kKeyBytes));
  if (bytes.size() != kKeyBytes) {
    *retry = bytes.size() < kKeyBytes;
    size_t n = bytes.size();
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return Status::Corruption("key file " + path + " holds " + std::to_string(n) +
                              " bytes, expected " + std::to_string(kKeyBytes));
  }
  SecretKey key(std::span<const uint8_t, kKeyBytes>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                     kKeyBytes));
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

// Creates the key file exclusively. Sets *exists when another process won
// the race (the caller then reads that file).
Result<SecretKey> CreateKeyFile(Env* env, const std::string& dir, const std::string& path,
                                bool* exists) {
  *exists = false;
  SecretKey key;
  MX_RETURN_IF_ERROR(env->RandomBytes(key.mutable_data(), kKeyBytes));
  auto file = env->NewWritableFile(path, 0600, /*exclusive=*/true);
  if (!file.ok()) {
    *exists = env->FileExists(path);
    return file.status();
  }
  Status st = file.value()->Append(
      std::string_view(reinterpret_cast<const char*>(key.data()), kKeyBytes));
  if (st.ok()) st = file.value()->Sync();
  Status closed = file.value()->Close();
  if (st.ok()) st = closed;
  if (st.ok()) st = env->SyncDir(dir);
  if (!st.ok()) {
    env->RemoveFile(path);
    return st.WithContext("writing key file " + path);
  }
  return key;
}

}  // namespace

Status PrepareCacheFolder(Env* env, const std::string& dir) {
  MX_RETURN_IF_ERROR(env->CreateDirs(dir, 0700));
  MX_ASSIGN_OR_RETURN(FileInfo info, env->GetFileInfo(dir));
  if (!info.is_dir) return Status::IOError("saved-cache folder " + dir + " is not a folder");
  const uint32_t uid = env->EffectiveUid();
  if (info.owner_uid != uid) {
    return Status::InvalidArgument(
        "saved-cache folder " + dir + " is owned by uid " + std::to_string(info.owner_uid) +
        ", not by this user (uid " + std::to_string(uid) +
        "): its owner could swap in their own key or files, so saved caches are refused there "
        "(chown it to this user or choose another MATRICXON_PROMPT_CACHE_DIR)");
  }
  if ((info.mode & 077) != 0) {
    if (Status st = env->ChangeMode(dir, 0700); !st.ok()) {
      return st.WithContext("saved-cache folder " + dir + " has mode " + ModeString(info.mode) +
                            " (open to group or others) and cannot be changed to 0700");
    }
    MX_LOG(kWarn) << "saved caches: folder " << dir << " had mode " << ModeString(info.mode)
                  << " (open to group or others); changed it to 0700";
  }
  return Status::Ok();
}

const char* KeySourceName(KeySource source) {
  switch (source) {
    case KeySource::kNone: return "none";
    case KeySource::kGenerated: return "generated";
    case KeySource::kPassphrase: return "passphrase";
    case KeySource::kCluster: return "cluster";
  }
  return "none";
}

KeyStore KeyStore::FromKey(const SecretKey& key, KeySource source) {
  KeyStore ks;
  ks.source_ = source;
  ks.key_ = key;
  ks.key_id_ = ComputeKeyId(key);
  return ks;
}

Result<KeyStore> KeyStore::Open(Env* env, const std::string& dir, const KeyStoreOptions& options) {
  if (!options.passphrase.empty()) {
    MX_ASSIGN_OR_RETURN(SecretKey key, DeriveKeyFromPassphrase(options.passphrase));
    return FromKey(key, options.cluster_node ? KeySource::kCluster : KeySource::kPassphrase);
  }
  if (options.cluster_node) {
    KeyStore off;
    off.disabled_reason_ =
        "saved caches are off: this is a cluster node (MATRICXON_CLUSTER_NODE=true) and "
        "MATRICXON_CACHE_KEY is not set; a cluster node never creates its own key";
    return off;
  }

  MX_RETURN_IF_ERROR(PrepareCacheFolder(env, dir));
  const std::string path = JoinPath(dir, kKeyFileName);
  // A few rounds cover a race with another process creating the same file.
  Status last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    Result<FileInfo> info = env->GetLinkInfo(path);  // a symbolic link is refused, not followed
    if (info.ok()) {
      bool retry = false;
      Result<SecretKey> key = ReadKeyFile(env, path, info.value(), &retry);
      if (key.ok()) return FromKey(key.value(), KeySource::kGenerated);
      if (!retry) return key.status();
      last = key.status();
      env->SleepMicros(10000);
      continue;
    }
    if (info.status().code() != Status::Code::kNotFound) return info.status();
    bool exists = false;
    Result<SecretKey> key = CreateKeyFile(env, dir, path, &exists);
    if (key.ok()) {
      KeyStore ks = FromKey(key.value(), KeySource::kGenerated);
      ks.created_ = true;
      return ks;
    }
    if (!exists) return key.status();
    last = key.status();
  }
  return last;
}

}  // namespace mx::cache
