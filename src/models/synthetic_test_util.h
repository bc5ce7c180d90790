// Helpers shared by the synthetic-model tests (make-model's writer):
// temp paths, a small spec for every block type, the batch-invariance run,
// and typed reads of a written file's metadata. Test-only; header-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "models/model.h"
#include "models/runner.h"
#include "models/synthetic_model.h"
#include "scratch_dir.h"

namespace mx::models::synthetic_test {

inline std::string TempPath(const std::string& name) {
  return testing_support::ProcessTempPath("synth_" + name);
}

// A small model whose rows (256, 512 values) suit every block type.
inline SyntheticSpec SmallSpec() {
  SyntheticSpec s;
  s.arch = "llama";
  s.n_layer = 2, s.n_embd = 256, s.n_head = 4, s.n_kv_head = 2, s.n_ff = 512;
  s.n_vocab = 512, s.n_ctx = 256;
  return s;
}

// Logits of `tokens` read in one batch, and token by token; both [n][n_vocab].
inline void RunBothWays(const Model& model, std::vector<float>* batched, std::vector<float>* stepwise) {
  auto runner = Runner::Create(model, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 64});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const std::vector<int32_t> tokens = {1, 7, 300, 42, 99, 5, 17, 256, 3, 64};
  auto a = (*runner)->NewSequence(), b = (*runner)->NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : tokens) batch.push_back({a.get(), t, true});
  ASSERT_TRUE((*runner)->Forward(batch, batched).ok());
  std::vector<float> logits;
  stepwise->clear();
  for (int32_t t : tokens) {
    const BatchEntry e{b.get(), t, true};
    ASSERT_TRUE((*runner)->Forward({&e, 1}, &logits).ok());
    stepwise->insert(stepwise->end(), logits.begin(), logits.end());
  }
}

// The vocabulary keys whose content a preset does not reproduce.
inline const std::set<std::string> kVocabContentKeys = {
    "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"};

inline std::string Show(const gguf::Value& v) {
  std::string s = gguf::ValueTypeName(v.type);
  if (v.type == gguf::ValueType::kArray) {
    s += std::string("[") + gguf::ValueTypeName(v.array_type) + " x " +
         std::to_string(v.array_size()) + "]";
    for (size_t i = 0; i < v.ints.size() && i < 8; ++i) s += " " + std::to_string(v.ints[i]);
  } else if (v.type == gguf::ValueType::kString) {
    s += " '" + v.str.substr(0, 60) + "'";
  } else if (v.is_float()) {
    s += " " + std::to_string(v.f);
  } else {
    s += " " + std::to_string(v.i);
  }
  return s;
}

inline bool SameValue(const gguf::Value& a, const gguf::Value& b) {
  return a.type == b.type && a.array_type == b.array_type && a.i == b.i && a.u == b.u &&
         a.f == b.f && a.str == b.str && a.ints == b.ints && a.floats == b.floats &&
         a.strings == b.strings;
}

inline std::unique_ptr<gguf::GgufFile> WritePreset(const SyntheticSpec& spec, const std::string& file) {
  const std::string path = TempPath(file);
  const Status st = WriteSyntheticModel(Env::Default(), spec, path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto f = gguf::GgufFile::Open(Env::Default(), path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

// Metadata values, or -1 / empty (and a failure) when absent or mistyped.
inline int64_t IntKey(const gguf::GgufFile& f, const std::string& key) {
  Result<int64_t> v = f.GetInt(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}
inline std::vector<int64_t> IntArrayKey(const gguf::GgufFile& f, const std::string& key) {
  Result<std::vector<int64_t>> v = f.GetIntArray(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::vector<int64_t>{};
}
inline std::string StringKey(const gguf::GgufFile& f, const std::string& key) {
  Result<std::string> v = f.GetString(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::string();
}

}  // namespace mx::models::synthetic_test
