// Constants and codecs of the saved-cache file format, version 3, as
// specified in docs/disk_cache_format.md (read that first; this header only
// names what it defines). Pure functions, no I/O; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/crypto/aead.h"
#include "core/status.h"

namespace mx::cache {

inline constexpr char kDiskMagic[4] = {'M', 'X', 'P', 'C'};
inline constexpr uint32_t kDiskFormatVersion = 3;
inline constexpr size_t kDiskHeaderBytes = 64;
inline constexpr size_t kFileIdBytes = 16;
// header || id || LE64(chunk index) || last flag
inline constexpr size_t kChunkAadBytes = kDiskHeaderBytes + kFileIdBytes + 8 + 1;
inline constexpr uint32_t kMinChunkBytes = 256;
inline constexpr uint32_t kMaxChunkBytes = uint32_t{1} << 28;
inline constexpr uint32_t kDefaultChunkBytes = uint32_t{4} << 20;
inline constexpr uint32_t kMaxModelFingerprintBytes = 4096;
inline constexpr uint32_t kMaxTenantBytes = 1024;
inline constexpr std::string_view kCacheFileSuffix = ".mxpc";
inline constexpr std::string_view kTempFileSuffix = ".mxpc.tmp";

using FileId = std::array<uint8_t, kFileIdBytes>;
using Salt = std::array<uint8_t, kSaltBytes>;

// --- Names (the one authority for file names in the cache folder).
std::string CacheFileName(std::string_view id_hex);  // "<id>.mxpc"
std::string TempFileName(std::string_view id_hex);   // "<id>.mxpc.tmp"
enum class FileNameKind { kOther, kCache, kTemp };
// Classifies a folder entry; for kCache/kTemp sets *id_hex (32 lowercase hex).
FileNameKind ClassifyFileName(std::string_view name, std::string* id_hex);
// Parses 32 lowercase hex digits. False for anything else.
bool ParseFileId(std::string_view id_hex, FileId* id);

// --- Clear header.
struct DiskHeader {
  KeyId key_id{};
  Salt salt{};
  uint32_t chunk_bytes = kDefaultChunkBytes;
  TenantTag tenant_tag{};  // DeriveTenantTag of the record's tenant (zero: none); in the file key too
};
void EncodeHeader(const DiskHeader& header, uint8_t out[kDiskHeaderBytes]);
// Checks magic (Corruption), version (NotSupported), flags/reserved zero and
// the chunk size range (Corruption). Does not check the key id.
Status DecodeHeader(std::span<const uint8_t> bytes, DiskHeader* header);

// --- Chunks.
struct ChunkLayout {
  uint64_t n_chunks = 0;
  uint64_t last_chunk_bytes = 0;  // plaintext bytes of the last chunk
  uint64_t plaintext_bytes = 0;
};
// Chunk layout of a sealed file of `file_bytes` bytes; Corruption when no
// layout gives that size (truncated or padded).
Result<ChunkLayout> LayoutForFileSize(uint64_t file_bytes, uint32_t chunk_bytes);
// File size of a plaintext of `plaintext_bytes` (> 0) bytes.
uint64_t SealedFileBytes(uint64_t plaintext_bytes, uint32_t chunk_bytes);
// The associated data of chunk `index`.
void MakeChunkAad(const uint8_t header[kDiskHeaderBytes], const FileId& id, uint64_t index,
                  bool last, uint8_t out[kChunkAadBytes]);

// --- Plaintext record: metadata then payload.
struct RecordMeta {
  std::string model_fingerprint;
  std::string tenant;  // who the chat belongs to ("" none), at most kMaxTenantBytes
  uint64_t layout_fingerprint = 0;
  uint64_t created_us = 0;
  uint64_t last_used_us = 0;
  uint64_t prompt_len = 0;  // of the tokens, how many came from the chat's last prompt (<= n_tokens)
};
// Size of the metadata record: 56 + model_fp_len + tenant_len + 4 * n_tokens.
uint64_t MetadataBytesFor(size_t model_fp_len, size_t tenant_len, size_t n_tokens);
// Metadata bytes (everything before the payload). REQUIRES: the fingerprint
// is 1..kMaxModelFingerprintBytes bytes, the tenant at most kMaxTenantBytes.
std::string EncodeMetadata(const RecordMeta& meta, std::span<const int32_t> tokens,
                           uint64_t payload_bytes);
// Parses a whole plaintext. Corruption naming the field when the record is
// inconsistent or does not fill the plaintext exactly.
Status ParseRecord(std::span<const uint8_t> plaintext, RecordMeta* meta,
                   std::vector<int32_t>* tokens, size_t* payload_offset);
// The same for a plaintext of `plaintext_bytes` of which only the first
// bytes, `prefix` (at least the whole metadata), are at hand.
Status ParseRecordPrefix(std::span<const uint8_t> prefix, uint64_t plaintext_bytes,
                         RecordMeta* meta, std::vector<int32_t>* tokens, size_t* payload_offset);
// Size of the metadata record at the start of `prefix`, or nullopt while
// `prefix` is too short to tell. Values out of range still give a size
// (ParseRecordPrefix rejects them).
std::optional<uint64_t> MetadataBytes(std::span<const uint8_t> prefix);

// FNV-1a 64 over the tokens' little-endian bytes (a compact id for logs).
uint64_t HashTokens(std::span<const int32_t> tokens);

}  // namespace mx::cache
