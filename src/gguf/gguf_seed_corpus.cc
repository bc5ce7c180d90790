// Writes the small seed corpus for gguf_fuzz into a folder (tests/fuzz/README.md):
//   gguf_seed_corpus tests/fuzz/gguf_corpus
// Each file is a few KB at most: one per section kind and value type, several
// tensor types, a non-default alignment, a v2 header and a few truncations.
#include <cstdio>
#include <string>
#include <vector>

#include "core/env.h"
#include "gguf/gguf_writer.h"

namespace mx::gguf {
namespace {

std::string Pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 131);
  return s;
}

std::vector<std::pair<std::string, std::string>> Seeds() {
  std::vector<std::pair<std::string, std::string>> out;
  {
    GgufWriter w;
    out.emplace_back("empty.gguf", w.Serialize());
  }
  GgufWriter meta;
  meta.SetString("general.architecture", "llama");
  meta.SetU8("u8", 1);
  meta.SetI8("i8", -1);
  meta.SetU16("u16", 2);
  meta.SetI16("i16", -2);
  meta.SetU32("llama.block_count", 2);
  meta.SetI32("i32", -3);
  meta.SetU64("u64", 4);
  meta.SetI64("i64", -4);
  meta.SetF32("f32", 0.5f);
  meta.SetF64("f64", 0.25);
  meta.SetBool("tokenizer.ggml.add_bos_token", true);
  meta.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
  meta.SetI32Array("llama.attention.head_count_kv", {2, 0});
  meta.SetF32Array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f, 0.0f});
  out.emplace_back("metadata.gguf", meta.Serialize());

  GgufWriter t = meta;
  (void)t.AddTensor("f32", DType::kF32, {8, 2}, Pattern(64, 1));
  (void)t.AddTensor("f16", DType::kF16, {5}, Pattern(10, 2));
  (void)t.AddTensor("q8", DType::kQ8_0, {32, 2}, Pattern(68, 3));
  (void)t.AddTensor("q4k", DType::kQ4_K, {256}, Pattern(144, 4));
  (void)t.AddTensor("bf16", DType::kBF16, {2, 1, 1, 2}, Pattern(8, 5));
  std::string tensors = t.Serialize();
  out.emplace_back("tensors.gguf", tensors);
  out.emplace_back("truncated-meta.gguf", tensors.substr(0, 150));
  out.emplace_back("truncated-data.gguf", tensors.substr(0, tensors.size() - 40));

  GgufWriter a;
  a.SetU32Alignment(64);
  (void)a.AddTensor("x", DType::kF32, {3}, Pattern(12, 6));
  (void)a.AddTensor("y", DType::kI32, {1, 1, 5}, Pattern(20, 7));
  out.emplace_back("align64.gguf", a.Serialize());

  std::string v2 = a.Serialize();
  v2[4] = 2;  // same layout, version 2
  out.emplace_back("v2.gguf", v2);
  return out;
}

}  // namespace
}  // namespace mx::gguf

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus folder>\n", argv[0]);
    return 2;
  }
  mx::Env* env = mx::Env::Default();
  mx::Status s = env->CreateDirs(argv[1]);
  for (const auto& [name, bytes] : mx::gguf::Seeds()) {
    if (s.ok()) s = env->WriteFileAtomic(mx::JoinPath(argv[1], name), bytes);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
