#include "cache/crypto/aead.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace mx::cache {
namespace {

constexpr std::string_view kKeyIdLabel = "matricxon prompt cache key id v1";
constexpr std::string_view kFileKeyInfo = "matricxon prompt cache file key v1";

std::string OpenSslError(const char* what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return std::string(what) + ": " + buf;
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

// EVP lengths are ints: feed large buffers in pieces.
constexpr size_t kMaxPiece = size_t{1} << 30;

}  // namespace

SecretKey::SecretKey(std::span<const uint8_t, kKeyBytes> bytes) {
  std::memcpy(bytes_.data(), bytes.data(), kKeyBytes);
}

SecretKey::~SecretKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

bool SecretKey::operator==(const SecretKey& other) const {
  return CRYPTO_memcmp(bytes_.data(), other.bytes_.data(), kKeyBytes) == 0;
}

KeyId ComputeKeyId(const SecretKey& key) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(kKeyBytes),
       reinterpret_cast<const unsigned char*>(kKeyIdLabel.data()), kKeyIdLabel.size(), mac,
       &mac_len);
  KeyId id{};
  std::memcpy(id.data(), mac, kKeyIdBytes);
  return id;
}

namespace {

// HKDF-SHA256 of `master` into `out`.
Status Hkdf(const SecretKey& master, std::span<const uint8_t> salt, std::span<const uint8_t> info,
            std::span<uint8_t> out) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return Status::Internal(OpenSslError("EVP_KDF_fetch(HKDF)"));
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return Status::Internal(OpenSslError("EVP_KDF_CTX_new"));
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  size_t n = 0;
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                                  const_cast<uint8_t*>(master.data()), kKeyBytes);
  if (!salt.empty()) {
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
                                                    const_cast<uint8_t*>(salt.data()), salt.size());
  }
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
                                                  const_cast<uint8_t*>(info.data()), info.size());
  params[n++] = OSSL_PARAM_construct_end();
  const int rc = EVP_KDF_derive(ctx, out.data(), out.size(), params);
  EVP_KDF_CTX_free(ctx);
  if (rc != 1) return Status::Internal(OpenSslError("HKDF derive"));
  return Status::Ok();
}

std::vector<uint8_t> Info(std::string_view label, std::span<const uint8_t> scope) {
  std::vector<uint8_t> info(label.begin(), label.end());
  info.insert(info.end(), scope.begin(), scope.end());
  return info;
}

}  // namespace

Result<FileKey> DeriveFileKey(const SecretKey& master, std::span<const uint8_t> salt,
                              std::span<const uint8_t> scope) {
  uint8_t out[kKeyBytes + kNonceBytes];
  MX_RETURN_IF_ERROR(Hkdf(master, salt, Info(kFileKeyInfo, scope), out));
  FileKey fk;
  std::memcpy(fk.key.mutable_data(), out, kKeyBytes);
  std::memcpy(fk.nonce_base.data(), out + kKeyBytes, kNonceBytes);
  OPENSSL_cleanse(out, sizeof(out));
  return fk;
}

Result<TenantTag> DeriveTenantTag(const SecretKey& master, std::string_view tenant) {
  TenantTag tag{};
  if (tenant.empty()) return tag;
  const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(tenant.data()), tenant.size());
  MX_RETURN_IF_ERROR(Hkdf(master, {}, Info("matricxon tenant tag v1", bytes), tag));
  return tag;
}

Nonce ChunkNonce(const FileKey& file_key, uint64_t chunk_index) {
  Nonce n = file_key.nonce_base;
  for (int i = 0; i < 8; ++i) n[4 + i] ^= static_cast<uint8_t>(chunk_index >> (8 * i));
  return n;
}

Status Seal(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad,
            std::span<const uint8_t> plaintext, uint8_t* out) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return Status::Internal(OpenSslError("EVP_CIPHER_CTX_new"));
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) != 1) {
    return Status::Internal(OpenSslError("AES-GCM encrypt init"));
  }
  int len = 0;
  for (size_t off = 0; off < aad.size(); off += kMaxPiece) {
    size_t n = std::min(kMaxPiece, aad.size() - off);
    if (EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad.data() + off, static_cast<int>(n)) != 1) {
      return Status::Internal(OpenSslError("AES-GCM aad"));
    }
  }
  size_t written = 0;
  for (size_t off = 0; off < plaintext.size(); off += kMaxPiece) {
    size_t n = std::min(kMaxPiece, plaintext.size() - off);
    if (EVP_EncryptUpdate(ctx.get(), out + written, &len, plaintext.data() + off,
                          static_cast<int>(n)) != 1) {
      return Status::Internal(OpenSslError("AES-GCM encrypt"));
    }
    written += static_cast<size_t>(len);
  }
  if (EVP_EncryptFinal_ex(ctx.get(), out + written, &len) != 1) {
    return Status::Internal(OpenSslError("AES-GCM encrypt final"));
  }
  written += static_cast<size_t>(len);
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          out + written) != 1) {
    return Status::Internal(OpenSslError("AES-GCM get tag"));
  }
  return Status::Ok();
}

Status Open(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad,
            std::span<const uint8_t> sealed, uint8_t* out) {
  if (sealed.size() < kTagBytes) {
    return Status::Corruption("sealed chunk of " + std::to_string(sealed.size()) +
                              " bytes is shorter than its 16-byte tag");
  }
  const size_t ct_len = sealed.size() - kTagBytes;
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return Status::Internal(OpenSslError("EVP_CIPHER_CTX_new"));
  if (EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) != 1) {
    return Status::Internal(OpenSslError("AES-GCM decrypt init"));
  }
  int len = 0;
  for (size_t off = 0; off < aad.size(); off += kMaxPiece) {
    size_t n = std::min(kMaxPiece, aad.size() - off);
    if (EVP_DecryptUpdate(ctx.get(), nullptr, &len, aad.data() + off, static_cast<int>(n)) != 1) {
      return Status::Internal(OpenSslError("AES-GCM aad"));
    }
  }
  size_t written = 0;
  for (size_t off = 0; off < ct_len; off += kMaxPiece) {
    size_t n = std::min(kMaxPiece, ct_len - off);
    if (EVP_DecryptUpdate(ctx.get(), out + written, &len, sealed.data() + off,
                          static_cast<int>(n)) != 1) {
      return Status::Internal(OpenSslError("AES-GCM decrypt"));
    }
    written += static_cast<size_t>(len);
  }
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          const_cast<uint8_t*>(sealed.data() + ct_len)) != 1) {
    return Status::Internal(OpenSslError("AES-GCM set tag"));
  }
  if (EVP_DecryptFinal_ex(ctx.get(), out + written, &len) != 1) {
    ERR_clear_error();
    return Status::Corruption("AES-GCM tag mismatch");
  }
  return Status::Ok();
}

GcmStream::GcmStream() : ctx_(EVP_CIPHER_CTX_new()) {}

GcmStream::~GcmStream() { EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(ctx_)); }

namespace {

Status BeginGcm(EVP_CIPHER_CTX* ctx, bool encrypt, const SecretKey& key, const Nonce& nonce,
                std::span<const uint8_t> aad) {
  if (ctx == nullptr) return Status::Internal(OpenSslError("EVP_CIPHER_CTX_new"));
  if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), nonce.data(), encrypt ? 1 : 0) !=
      1) {
    return Status::Internal(OpenSslError("AES-GCM init"));
  }
  int len = 0;
  for (size_t off = 0; off < aad.size(); off += kMaxPiece) {
    size_t n = std::min(kMaxPiece, aad.size() - off);
    if (EVP_CipherUpdate(ctx, nullptr, &len, aad.data() + off, static_cast<int>(n)) != 1) {
      return Status::Internal(OpenSslError("AES-GCM aad"));
    }
  }
  return Status::Ok();
}

}  // namespace

Status GcmStream::BeginOpen(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad) {
  return BeginGcm(static_cast<EVP_CIPHER_CTX*>(ctx_), false, key, nonce, aad);
}

Status GcmStream::BeginSeal(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad) {
  return BeginGcm(static_cast<EVP_CIPHER_CTX*>(ctx_), true, key, nonce, aad);
}

Status GcmStream::Update(const uint8_t* in, uint8_t* out, size_t n) {
  auto* ctx = static_cast<EVP_CIPHER_CTX*>(ctx_);
  size_t written = 0;
  for (size_t off = 0; off < n; off += kMaxPiece) {
    const size_t piece = std::min(kMaxPiece, n - off);
    int len = 0;
    if (EVP_CipherUpdate(ctx, out + written, &len, in + off, static_cast<int>(piece)) != 1) {
      return Status::Internal(OpenSslError("AES-GCM update"));
    }
    written += static_cast<size_t>(len);
  }
  // GCM is a stream mode: OpenSSL writes every byte it is given at once.
  if (written != n) return Status::Internal("AES-GCM update wrote " + std::to_string(written) + " of " +
                                            std::to_string(n) + " bytes");
  return Status::Ok();
}

Status GcmStream::FinishOpen(const uint8_t tag[kTagBytes]) {
  auto* ctx = static_cast<EVP_CIPHER_CTX*>(ctx_);
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          const_cast<uint8_t*>(tag)) != 1) {
    return Status::Internal(OpenSslError("AES-GCM set tag"));
  }
  uint8_t none[16];
  int len = 0;
  if (EVP_DecryptFinal_ex(ctx, none, &len) != 1) {
    ERR_clear_error();
    return Status::Corruption("AES-GCM tag mismatch");
  }
  return Status::Ok();
}

Status GcmStream::FinishSeal(uint8_t tag[kTagBytes]) {
  auto* ctx = static_cast<EVP_CIPHER_CTX*>(ctx_);
  uint8_t none[16];
  int len = 0;
  if (EVP_EncryptFinal_ex(ctx, none, &len) != 1) {
    return Status::Internal(OpenSslError("AES-GCM encrypt final"));
  }
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) != 1) {
    return Status::Internal(OpenSslError("AES-GCM get tag"));
  }
  return Status::Ok();
}

Result<SecretKey> DeriveKeyFromPassphrase(std::string_view passphrase) {
  if (passphrase.empty()) return Status::InvalidArgument("empty cache key passphrase");
  SecretKey key;
  // Memory: 128 * N * r * p bytes = 32 MiB; allow twice that.
  const uint64_t max_mem = 2 * 128 * kScryptN * kScryptR * kScryptP;
  if (EVP_PBE_scrypt(passphrase.data(), passphrase.size(),
                     reinterpret_cast<const unsigned char*>(kScryptSalt.data()), kScryptSalt.size(),
                     kScryptN, kScryptR, kScryptP, max_mem, key.mutable_data(), kKeyBytes) != 1) {
    return Status::Internal(OpenSslError("scrypt"));
  }
  return key;
}

std::string ToHex(std::span<const uint8_t> bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

}  // namespace mx::cache
