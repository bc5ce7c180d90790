// KeyStore: where the saved-cache master key comes from (SPEC §6).
//
//   passphrase set, not a cluster node -> scrypt(passphrase)   "passphrase"
//   passphrase set, cluster node       -> scrypt(passphrase)   "cluster"
//   no passphrase, cluster node        -> saved caches off     "none" + reason
//   no passphrase, single node         -> prompt_cache.key     "generated"
//
// The key file holds exactly 32 random bytes, mode 0600, created exclusively
// (O_EXCL) in the cache folder; an existing file whose mode grants anything
// to group or others, that another user owns, or that is not a regular file
// (a symbolic link is not followed) is refused with an error naming the file
// and what is wrong. The folder itself is checked first (PrepareCacheFolder):
// whoever can write it could swap in their own key.
// A passphrase always wins over an existing key file (files sealed under the
// file's key are then deleted by the next StartupCheck, SPEC §6).
// A cluster node never creates a key file. Settings come in as options: this
// class reads no environment variables.
//
// Thread-safety: immutable after Open(); share freely.
#pragma once

#include <string>

#include "cache/crypto/aead.h"
#include "core/env.h"
#include "core/status.h"

namespace mx::cache {

inline constexpr char kKeyFileName[] = "prompt_cache.key";

// Creates the saved-cache folder `dir` (mode 0700) or checks the one there,
// so that nobody but this process's user can put files into it:
//   - not a folder -> IOError;
//   - owned by another user -> InvalidArgument naming the folder, its owner
//     and ours (saved caches are refused there; nothing is changed);
//   - owned by us but open to group or others (e.g. 0777, 0755) -> chmod
//     0700, with a warning log line saying so (an error when chmod fails).
// `dir` itself may be a symbolic link to a folder (what it points to is
// checked). Thread-safe.
Status PrepareCacheFolder(Env* env, const std::string& dir);

enum class KeySource { kNone, kGenerated, kPassphrase, kCluster };
// "none" | "generated" | "passphrase" | "cluster" (the /api/cache/persistence words).
const char* KeySourceName(KeySource source);

struct KeyStoreOptions {
  std::string passphrase;     // MATRICXON_CACHE_KEY; empty = not set
  bool cluster_node = false;  // MATRICXON_CLUSTER_NODE
};

class KeyStore {
 public:
  // Finds or makes the key for the cache folder `dir` (PrepareCacheFolder
  // when a key file is used). Errors: the folder's (PrepareCacheFolder); the
  // key file is readable by group/others, owned by another user or not a
  // regular file (InvalidArgument naming file and the reason), has the wrong
  // size (Corruption), cannot be read or created (IOError/NotFound/...).
  // A cluster node without a passphrase is not an error: the result is
  // !enabled() with disabled_reason() set.
  static Result<KeyStore> Open(Env* env, const std::string& dir, const KeyStoreOptions& options);

  // A store with a given key (tests, tools).
  static KeyStore FromKey(const SecretKey& key, KeySource source);

  bool enabled() const { return source_ != KeySource::kNone; }
  KeySource source() const { return source_; }
  // Why saved caches are off (empty when enabled()).
  const std::string& disabled_reason() const { return disabled_reason_; }
  // REQUIRES: enabled().
  const SecretKey& key() const { return key_; }
  const KeyId& key_id() const { return key_id_; }
  // True when Open() wrote a new key file this time.
  bool created_key_file() const { return created_; }

 private:
  KeySource source_ = KeySource::kNone;
  SecretKey key_;
  KeyId key_id_{};
  std::string disabled_reason_;
  bool created_ = false;
};

}  // namespace mx::cache
