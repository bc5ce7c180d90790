// Tokenizer throughput (Google Benchmark): MB/s of Encode for the reference
// byte-level BPE vocabulary (../shared/ref/tokenizer.json) with the llama3
// and qwen2 pre-tokenizers, on ~2 MB of the reference prompts repeated (a
// long pasted document). Every chat turn tokenizes the whole conversation,
// so this must stay far above what a prompt costs to read.
//   build/bench/tokenizer_bench   (MATRICXON_REF_DIR overrides the folder)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "tokenizer/tokenizer.h"

namespace mx::bench {
namespace {

using json = nlohmann::json;

std::string RefDir() {
  const char* dir = std::getenv("MATRICXON_REF_DIR");
  return dir != nullptr ? dir : MATRICXON_REF_DIR;
}

const json& RefJson(const std::string& name) {
  static std::map<std::string, json>* cache = new std::map<std::string, json>;
  auto it = cache->find(name);
  if (it != cache->end()) return it->second;
  auto content = Env::Default()->ReadFile(JoinPath(RefDir(), name));
  return (*cache)[name] = content.ok() ? json::parse(content.value(), nullptr, false) : json();
}

std::unique_ptr<tokenizer::Tokenizer> RefTokenizer(const std::string& pre) {
  const json& j = RefJson("tokenizer.json");
  if (!j.is_object()) return nullptr;
  tokenizer::VocabData data;
  data.model = "gpt2";
  data.pre = pre;
  data.tokens = j["tokens"].get<std::vector<std::string>>();
  data.types = j["token_types"].get<std::vector<int32_t>>();
  data.merges = j["merges"].get<std::vector<std::string>>();
  data.bos_id = j["special_tokens"]["<|endoftext|>"].get<int32_t>();
  data.eos_id = j["special_tokens"]["<|im_end|>"].get<int32_t>();
  data.pad_id = data.bos_id;
  auto t = tokenizer::Tokenizer::Create(std::move(data));
  return t.ok() ? std::move(t).value() : nullptr;
}

const std::string& Document() {
  static const std::string text = [] {
    std::string corpus, out;
    const json& prompts = RefJson("prompts.json");
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

void BM_Encode(benchmark::State& state, const std::string& pre) {
  auto tok = RefTokenizer(pre);
  const std::string& text = Document();
  if (tok == nullptr || text.empty()) {
    state.SkipWithError("reference tokenizer data not found (MATRICXON_REF_DIR)");
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
BENCHMARK_CAPTURE(BM_Encode, llama_bpe, std::string("llama-bpe"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, qwen2, std::string("qwen2"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mx::bench

BENCHMARK_MAIN();
