// Tokenizer throughput (Google Benchmark): MB/s of Encode with the tokenizers
// of two reference models (../shared/ref/models: tiny-llama, the llama3
// pre-tokenizer; tiny-qwen3, qwen2), read from the GGUF files as the server
// reads them, on ~2 MB of the reference prompts repeated (a long pasted
// document). Every chat turn tokenizes the whole conversation,
// so this must stay far above what a prompt costs to read.
//   build/bench/tokenizer_bench   (MATRICXON_REF_DIR overrides the folder)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace mx::bench {
namespace {

using json = nlohmann::json;

std::string RefDir() {
  const char* dir = std::getenv("MATRICXON_REF_DIR");
  return dir != nullptr ? dir : MATRICXON_REF_DIR;
}

std::unique_ptr<tokenizer::Tokenizer> RefTokenizer(const std::string& model) {
  auto file = gguf::GgufFile::Open(Env::Default(), JoinPath(RefDir(), "models/" + model + ".gguf"));
  if (!file.ok()) return nullptr;
  auto t = tokenizer::TokenizerFromGguf(**file);
  return t.ok() ? std::move(t).value() : nullptr;
}

const std::string& Document() {
  static const std::string text = [] {
    std::string corpus, out;
    auto content = Env::Default()->ReadFile(JoinPath(RefDir(), "prompts.json"));
    const json prompts = content.ok() ? json::parse(content.value(), nullptr, false) : json();
    if (prompts.is_array()) {
      for (const json& p : prompts) {
        if (p.contains("text")) corpus += p["text"].get<std::string>() + "\n";
      }
    }
    if (corpus.empty()) return out;
    while (out.size() < (2u << 20)) out += corpus;
    return out;
  }();
  return text;
}

void BM_Encode(benchmark::State& state, const std::string& model) {
  auto tok = RefTokenizer(model);
  const std::string& text = Document();
  if (tok == nullptr || text.empty()) {
    state.SkipWithError("reference model or prompts not found (MATRICXON_REF_DIR)");
    return;
  }
  size_t n_ids = 0;
  for (auto _ : state) {
    const auto ids = tok->Encode(text, /*add_special=*/false, /*parse_special=*/true);
    n_ids = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_ids);
}
BENCHMARK_CAPTURE(BM_Encode, llama_bpe, std::string("tiny-llama"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, qwen2, std::string("tiny-qwen3"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mx::bench

BENCHMARK_MAIN();
