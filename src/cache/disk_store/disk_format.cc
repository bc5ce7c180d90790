#include "cache/disk_store/disk_format.h"

#include <cstring>

namespace mx::cache {
namespace {

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
void AppendU32(std::string* s, uint32_t v) {
  uint8_t b[4];
  PutU32(b, v);
  s->append(reinterpret_cast<const char*>(b), 4);
}
void AppendU64(std::string* s, uint64_t v) {
  uint8_t b[8];
  PutU64(b, v);
  s->append(reinterpret_cast<const char*>(b), 8);
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Sequential reader over the plaintext with bounds checks.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}
  bool Has(uint64_t n) const { return n <= data_.size() - pos_; }
  uint32_t U32() { uint32_t v = GetU32(data_.data() + pos_); pos_ += 4; return v; }
  uint64_t U64() { uint64_t v = GetU64(data_.data() + pos_); pos_ += 8; return v; }
  const uint8_t* Take(size_t n) { const uint8_t* p = data_.data() + pos_; pos_ += n; return p; }
  size_t pos() const { return pos_; }
  size_t left() const { return data_.size() - pos_; }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

}  // namespace

std::string CacheFileName(std::string_view id_hex) {
  return std::string(id_hex) + std::string(kCacheFileSuffix);
}

std::string TempFileName(std::string_view id_hex) {
  return std::string(id_hex) + std::string(kTempFileSuffix);
}

bool ParseFileId(std::string_view id_hex, FileId* id) {
  if (id_hex.size() != 2 * kFileIdBytes || !IsLowerHex(id_hex)) return false;
  auto nibble = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
  for (size_t i = 0; i < kFileIdBytes; ++i) {
    (*id)[i] = static_cast<uint8_t>(nibble(id_hex[2 * i]) << 4 | nibble(id_hex[2 * i + 1]));
  }
  return true;
}

FileNameKind ClassifyFileName(std::string_view name, std::string* id_hex) {
  FileId id;
  auto try_suffix = [&](std::string_view suffix) {
    if (name.size() != 2 * kFileIdBytes + suffix.size()) return false;
    if (name.substr(2 * kFileIdBytes) != suffix) return false;
    if (!ParseFileId(name.substr(0, 2 * kFileIdBytes), &id)) return false;
    *id_hex = std::string(name.substr(0, 2 * kFileIdBytes));
    return true;
  };
  if (try_suffix(kCacheFileSuffix)) return FileNameKind::kCache;
  if (try_suffix(kTempFileSuffix)) return FileNameKind::kTemp;
  return FileNameKind::kOther;
}

void EncodeHeader(const DiskHeader& header, uint8_t out[kDiskHeaderBytes]) {
  std::memset(out, 0, kDiskHeaderBytes);
  std::memcpy(out, kDiskMagic, 4);
  PutU32(out + 4, kDiskFormatVersion);
  std::memcpy(out + 8, header.key_id.data(), kKeyIdBytes);
  std::memcpy(out + 16, header.salt.data(), kSaltBytes);
  PutU32(out + 48, header.chunk_bytes);
  // 52: flags = 0; 56: the tenant tag.
  std::memcpy(out + 56, header.tenant_tag.data(), kTenantTagBytes);
}

Status DecodeHeader(std::span<const uint8_t> bytes, DiskHeader* header) {
  if (bytes.size() < kDiskHeaderBytes) {
    return Status::Corruption("header truncated: " + std::to_string(bytes.size()) + " of " +
                              std::to_string(kDiskHeaderBytes) + " bytes");
  }
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kDiskMagic, 4) != 0) return Status::Corruption("bad magic (expected MXPC)");
  uint32_t version = GetU32(p + 4);
  if (version != kDiskFormatVersion) {
    return Status::NotSupported("format version " + std::to_string(version) + ", this build reads " +
                                std::to_string(kDiskFormatVersion));
  }
  if (GetU32(p + 52) != 0) return Status::Corruption("nonzero header flags");
  std::memcpy(header->tenant_tag.data(), p + 56, kTenantTagBytes);
  std::memcpy(header->key_id.data(), p + 8, kKeyIdBytes);
  std::memcpy(header->salt.data(), p + 16, kSaltBytes);
  header->chunk_bytes = GetU32(p + 48);
  if (header->chunk_bytes < kMinChunkBytes || header->chunk_bytes > kMaxChunkBytes) {
    return Status::Corruption("chunk size " + std::to_string(header->chunk_bytes) +
                              " outside [" + std::to_string(kMinChunkBytes) + ", " +
                              std::to_string(kMaxChunkBytes) + "]");
  }
  return Status::Ok();
}

Result<ChunkLayout> LayoutForFileSize(uint64_t file_bytes, uint32_t chunk_bytes) {
  if (file_bytes < kDiskHeaderBytes + kTagBytes + 1) {
    return Status::Corruption("truncated: " + std::to_string(file_bytes) +
                              " bytes cannot hold a header and one chunk");
  }
  const uint64_t body = file_bytes - kDiskHeaderBytes;
  const uint64_t stride = uint64_t{chunk_bytes} + kTagBytes;
  ChunkLayout layout;
  layout.n_chunks = (body + stride - 1) / stride;
  const uint64_t last_sealed = body - (layout.n_chunks - 1) * stride;
  if (last_sealed < kTagBytes + 1) {
    return Status::Corruption("truncated: last chunk holds " + std::to_string(last_sealed) +
                              " bytes, less than a tag and one byte");
  }
  layout.last_chunk_bytes = last_sealed - kTagBytes;
  layout.plaintext_bytes = (layout.n_chunks - 1) * uint64_t{chunk_bytes} + layout.last_chunk_bytes;
  return layout;
}

uint64_t SealedFileBytes(uint64_t plaintext_bytes, uint32_t chunk_bytes) {
  const uint64_t n = (plaintext_bytes + chunk_bytes - 1) / chunk_bytes;
  return kDiskHeaderBytes + plaintext_bytes + n * kTagBytes;
}

void MakeChunkAad(const uint8_t header[kDiskHeaderBytes], const FileId& id, uint64_t index,
                  bool last, uint8_t out[kChunkAadBytes]) {
  std::memcpy(out, header, kDiskHeaderBytes);
  std::memcpy(out + kDiskHeaderBytes, id.data(), kFileIdBytes);
  PutU64(out + kDiskHeaderBytes + kFileIdBytes, index);
  out[kChunkAadBytes - 1] = last ? 1 : 0;
}

uint64_t MetadataBytesFor(size_t model_fp_len, size_t tenant_len, size_t n_tokens) {
  return 4 + uint64_t{model_fp_len} + 4 + uint64_t{tenant_len} + 5 * 8 + 4 * uint64_t{n_tokens} + 8;
}

std::string EncodeMetadata(const RecordMeta& meta, std::span<const int32_t> tokens,
                           uint64_t payload_bytes) {
  std::string out;
  out.reserve(MetadataBytesFor(meta.model_fingerprint.size(), meta.tenant.size(), tokens.size()));
  AppendU32(&out, static_cast<uint32_t>(meta.model_fingerprint.size()));
  out.append(meta.model_fingerprint);
  AppendU32(&out, static_cast<uint32_t>(meta.tenant.size()));
  out.append(meta.tenant);
  AppendU64(&out, meta.layout_fingerprint);
  AppendU64(&out, meta.created_us);
  AppendU64(&out, meta.last_used_us);
  AppendU64(&out, meta.prompt_len);
  AppendU64(&out, tokens.size());
  for (int32_t t : tokens) AppendU32(&out, static_cast<uint32_t>(t));
  AppendU64(&out, payload_bytes);
  return out;
}

std::optional<uint64_t> MetadataBytes(std::span<const uint8_t> prefix) {
  if (prefix.size() < 4) return std::nullopt;
  const uint64_t fp_len = GetU32(prefix.data());
  if (prefix.size() < 4 + fp_len + 4) return std::nullopt;
  const uint64_t tenant_len = GetU32(prefix.data() + 4 + fp_len);
  const uint64_t n_tokens_at = 4 + fp_len + 4 + tenant_len + 32;
  if (prefix.size() < n_tokens_at + 8) return std::nullopt;
  const uint64_t n_tokens = GetU64(prefix.data() + n_tokens_at);
  if (n_tokens > (uint64_t{1} << 60)) return UINT64_MAX;  // absurd; rejected by the parser
  return n_tokens_at + 8 + 4 * n_tokens + 8;
}

Status ParseRecord(std::span<const uint8_t> plaintext, RecordMeta* meta,
                   std::vector<int32_t>* tokens, size_t* payload_offset) {
  return ParseRecordPrefix(plaintext, plaintext.size(), meta, tokens, payload_offset);
}

Status ParseRecordPrefix(std::span<const uint8_t> prefix, uint64_t plaintext_bytes,
                         RecordMeta* meta, std::vector<int32_t>* tokens, size_t* payload_offset) {
  if (prefix.size() > plaintext_bytes) return Status::Internal("record prefix longer than the record");
  Reader r(prefix);
  if (!r.Has(4)) return Status::Corruption("record truncated before the model fingerprint");
  uint32_t fp_len = r.U32();
  if (fp_len == 0 || fp_len > kMaxModelFingerprintBytes || !r.Has(fp_len)) {
    return Status::Corruption("model fingerprint length " + std::to_string(fp_len) +
                              " out of range");
  }
  meta->model_fingerprint.assign(reinterpret_cast<const char*>(r.Take(fp_len)), fp_len);
  if (!r.Has(4)) return Status::Corruption("record truncated before the tenant");
  const uint32_t tenant_len = r.U32();
  if (tenant_len > kMaxTenantBytes || !r.Has(tenant_len)) {
    return Status::Corruption("tenant length " + std::to_string(tenant_len) + " out of range");
  }
  meta->tenant.assign(reinterpret_cast<const char*>(r.Take(tenant_len)), tenant_len);
  if (!r.Has(40)) return Status::Corruption("record truncated in the metadata");
  meta->layout_fingerprint = r.U64();
  meta->created_us = r.U64();
  meta->last_used_us = r.U64();
  meta->prompt_len = r.U64();
  uint64_t n_tokens = r.U64();
  if (n_tokens > r.left() / 4) {
    return Status::Corruption("token count " + std::to_string(n_tokens) + " exceeds the record");
  }
  if (meta->prompt_len > n_tokens) {
    return Status::Corruption("prompt length " + std::to_string(meta->prompt_len) + " exceeds the " +
                              std::to_string(n_tokens) + " tokens");
  }
  tokens->resize(n_tokens);
  const uint8_t* tp = r.Take(4 * n_tokens);
  for (uint64_t i = 0; i < n_tokens; ++i) (*tokens)[i] = static_cast<int32_t>(GetU32(tp + 4 * i));
  if (!r.Has(8)) return Status::Corruption("record truncated before the payload length");
  uint64_t payload_bytes = r.U64();
  const uint64_t holds = plaintext_bytes - r.pos();
  if (payload_bytes != holds) {
    return Status::Corruption("payload length " + std::to_string(payload_bytes) + ", record holds " +
                              std::to_string(holds));
  }
  *payload_offset = r.pos();
  return Status::Ok();
}

uint64_t HashTokens(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) {
    uint32_t u = static_cast<uint32_t>(t);
    for (int i = 0; i < 4; ++i) {
      h ^= (u >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace mx::cache
