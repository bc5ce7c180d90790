// AES-256-GCM sealing for saved caches (docs/disk_cache_format.md), on
// OpenSSL 3 EVP. Every saved file gets its own key, derived with
// HKDF-SHA256 from the master key and the file's random salt, together with
// a 96-bit nonce base; chunk i is sealed under nonce = base XOR LE64(i) in the
// last 8 bytes. The key is unique per file and the chunk index is unique
// within a file, so no (key, nonce) pair is ever used twice.
//
// Failure to authenticate is always Status::Corruption. All functions are
// thread-safe (no shared state).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace mx::cache {

inline constexpr size_t kKeyBytes = 32;    // AES-256
inline constexpr size_t kNonceBytes = 12;  // GCM's 96-bit IV
inline constexpr size_t kTagBytes = 16;    // full GCM tag
inline constexpr size_t kKeyIdBytes = 8;
inline constexpr size_t kSaltBytes = 32;

// A 256-bit secret. Copyable (a copy is another secret to wipe); the bytes
// are wiped with OPENSSL_cleanse when the object dies.
class SecretKey {
 public:
  SecretKey() { bytes_.fill(0); }
  explicit SecretKey(std::span<const uint8_t, kKeyBytes> bytes);
  SecretKey(const SecretKey& other) = default;
  SecretKey& operator=(const SecretKey& other) = default;
  ~SecretKey();

  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* mutable_data() { return bytes_.data(); }
  bool operator==(const SecretKey& other) const;

 private:
  std::array<uint8_t, kKeyBytes> bytes_;
};

using KeyId = std::array<uint8_t, kKeyIdBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;

// First 8 bytes of HMAC-SHA256(key, "matricxon prompt cache key id v1"):
// names a key in the clear without revealing it, so a file sealed under
// another key is recognised without trying to decrypt it.
KeyId ComputeKeyId(const SecretKey& key);

// The per-file key and nonce base.
struct FileKey {
  SecretKey key;
  Nonce nonce_base{};
};

// HKDF-SHA256(ikm = master, salt = salt, info = "matricxon prompt cache file
// key v1" || scope) -> 44 bytes: 32 key bytes, then 12 nonce-base bytes.
// `scope` (may be empty) binds the key to more than the salt: the saved
// caches pass the file's tenant tag. Internal (OpenSSL failure) is the only
// error.
Result<FileKey> DeriveFileKey(const SecretKey& master, std::span<const uint8_t> salt,
                              std::span<const uint8_t> scope = {});

// An 8-byte tag naming a tenant without revealing it: HKDF-SHA256(ikm =
// master, no salt, info = "matricxon tenant tag v1" || tenant), first 8
// bytes. All zero for the empty tenant (no tenant). Only the key's holder
// can compute or test it.
inline constexpr size_t kTenantTagBytes = 8;
using TenantTag = std::array<uint8_t, kTenantTagBytes>;
Result<TenantTag> DeriveTenantTag(const SecretKey& master, std::string_view tenant);

// nonce_base with LE64(chunk_index) XORed into bytes 4..11.
Nonce ChunkNonce(const FileKey& file_key, uint64_t chunk_index);

// Encrypts `plaintext` and writes ciphertext followed by the 16-byte tag to
// `out`. REQUIRES: out holds plaintext.size() + kTagBytes bytes; `out` may not
// overlap `plaintext`.
Status Seal(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad,
            std::span<const uint8_t> plaintext, uint8_t* out);

// Decrypts `sealed` (ciphertext || tag) into `out` and checks the tag over
// the ciphertext and `aad`. Corruption when the tag does not match (wrong
// key, changed byte, wrong aad) or `sealed` is shorter than a tag; then `out`
// holds garbage that must not be used.
// REQUIRES: out holds sealed.size() - kTagBytes bytes.
Status Open(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad,
            std::span<const uint8_t> sealed, uint8_t* out);

// Streaming AES-256-GCM over one chunk whose bytes come in pieces: the
// ciphertext can be read straight into its final memory and decrypted there
// (in place), and a plaintext gathered from several buffers can be sealed
// without first being copied together. The result is the same as Seal/Open
// over the concatenated pieces. One object may be reused for many chunks
// (Begin starts over). Not thread-safe: one per thread.
class GcmStream {
 public:
  GcmStream();
  ~GcmStream();
  GcmStream(const GcmStream&) = delete;
  GcmStream& operator=(const GcmStream&) = delete;

  // Starts decrypting (open) or encrypting (seal) a chunk under key/nonce
  // with associated data `aad`. Internal on an OpenSSL failure.
  Status BeginOpen(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad);
  Status BeginSeal(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad);
  // Transforms the next n bytes of the chunk from `in` to `out`. in == out
  // is allowed (in place); otherwise they must not overlap. Any n, any
  // number of calls.
  Status Update(const uint8_t* in, uint8_t* out, size_t n);
  // Open: checks the tag over everything since BeginOpen; Corruption when it
  // does not match (everything written to `out` must then be discarded).
  Status FinishOpen(const uint8_t tag[kTagBytes]);
  // Seal: writes the tag.
  Status FinishSeal(uint8_t tag[kTagBytes]);

 private:
  void* ctx_;  // EVP_CIPHER_CTX
};

// scrypt parameters for passphrase keys. Fixed by format version 1: every
// node with the same passphrase derives the same key. Changing any of them
// is a new format version. (N = 2^15, r = 8, p = 1: 32 MiB, ~0.1 s.)
inline constexpr uint64_t kScryptN = uint64_t{1} << 15;
inline constexpr uint64_t kScryptR = 8;
inline constexpr uint64_t kScryptP = 1;
inline constexpr std::string_view kScryptSalt = "matricxon prompt cache passphrase v1";

// scrypt(passphrase, kScryptSalt, N, r, p) -> 32 bytes. InvalidArgument for
// an empty passphrase; Internal if OpenSSL fails.
Result<SecretKey> DeriveKeyFromPassphrase(std::string_view passphrase);

// Lowercase hex of bytes (for ids and logs).
std::string ToHex(std::span<const uint8_t> bytes);

}  // namespace mx::cache
