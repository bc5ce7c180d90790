// Test helpers for the GGUF reader tests: a field-by-field byte builder for
// files the writer refuses to make, a parse over an exactly-sized copy (so that
// ASan sees any over-read), and error expectations. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace mx::gguf::test {

using Code = Status::Code;

inline constexpr uint32_t kMagic = 0x46554747;

// Builds raw GGUF bytes field by field, for files the writer refuses to make.
class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Pod(v); }
  Bytes& U32(uint32_t v) { return Pod(v); }
  Bytes& U64(uint64_t v) { return Pod(v); }
  Bytes& I64(int64_t v) { return Pod(v); }
  Bytes& Str(std::string_view s) {
    U64(s.size());
    s_.append(s);
    return *this;
  }
  Bytes& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return U32(kMagic).U32(version).U64(n_tensors).U64(n_kv);
  }
  // Tensor info entry: name, n_dims, dims, type, offset.
  Bytes& Info(std::string_view name, const std::vector<int64_t>& dims, uint32_t type,
              uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) I64(d);
    return U32(type).U64(offset);
  }
  Bytes& PadTo(size_t align) {
    s_.resize((s_.size() + align - 1) / align * align, '\0');
    return *this;
  }
  Bytes& Zeros(size_t n) {
    s_.append(n, '\0');
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  template <typename T>
  Bytes& Pod(T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    s_.append(buf, sizeof(T));
    return *this;
  }
  std::string s_;
};

inline const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// Parses a copy of `bytes` in a buffer of exactly that size, so that ASan sees
// any read past the end. Returns the error, or OK.
inline Status ParseStatus(const std::string& bytes) {
  std::vector<uint8_t> buf(bytes.begin(), bytes.end());
  auto r = GgufFile::Parse(buf.data(), buf.size(), "hostile.gguf");
  return r.ok() ? Status::Ok() : r.status();
}

// Expects `s` to have `code` and a message naming the file and every part.
inline void ExpectError(const Status& s, Code code, std::initializer_list<const char*> parts) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find("hostile.gguf"), std::string::npos) << s.ToString();
  for (const char* part : parts) {
    EXPECT_NE(s.message().find(part), std::string::npos)
        << "message lacks \"" << part << "\": " << s.ToString();
  }
}

// A file with no metadata and one tensor, its data section `data_bytes` long.
inline std::string OneTensorFile(std::string_view name, const std::vector<int64_t>& dims, uint32_t type,
                          uint64_t offset, size_t data_bytes) {
  return Bytes().Header(1, 0).Info(name, dims, type, offset).PadTo(32).Zeros(data_bytes).str();
}

// A file with one key of value type `type` whose payload `payload` follows.
inline std::string OneKeyFile(std::string_view key, uint32_t type, const std::string& payload) {
  return Bytes().Header(0, 1).Str(key).U32(type).str() + payload;
}

inline std::string Pattern(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 131);
  return s;
}

// Reads everything a consumer would: metadata and each tensor's first and last byte.
inline int TouchAll(const GgufFile& f) {
  int sum = 0;
  for (const auto& [key, v] : f.metadata()) sum += static_cast<int>(key.size() + v.array_size());
  for (const TensorInfo& t : f.tensors()) sum += t.data[0] + t.data[t.n_bytes - 1];
  return sum;
}

// A few-KB file of every section kind whose last tensor ends exactly at the end
// of the file (no trailing padding), so that every truncation must fail.
inline std::string SmallFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 2);
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  std::vector<std::string> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back("tok" + std::to_string(i));
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetI32Array("llama.attention.head_count_kv", {2, 0});
  w.SetF32Array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f});
  EXPECT_TRUE(w.AddTensor("a.weight", DType::kF32, {16, 8}, Pattern(512, 1)).ok());
  EXPECT_TRUE(w.AddTensor("b.weight", DType::kQ8_0, {32, 4}, Pattern(136, 2)).ok());
  EXPECT_TRUE(w.AddTensor("c.weight", DType::kF32, {8, 4}, Pattern(128, 3)).ok());
  return w.Serialize();
}

}  // namespace mx::gguf::test
