// Constrained decoding cost (Google Benchmark): GrammarConstraint::Allows
// for the drawn token and Mask over the whole vocabulary, at three points of
// a JSON-schema reply (inside a string, between properties, inside a
// number), on a 151,936-token vocabulary (Qwen's size) of real pieces: the
// deepseek-llm, gpt-2, deepseek-coder, llama-spm and phi-3 vocabularies of
// ../shared/vocab, deduplicated by bytes, topped up with space-prefixed
// copies of their pieces. Mask/cold: a fresh clone (no cached transitions);
// Mask/walk: warm transitions, one trie walk; Mask/cached: the same
// position again. Compare with a decode step (docs/structured_output.md).
//   build/bench/grammar_bench   (MATRICXON_REF_DIR overrides the folder)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace mx::bench {
namespace {

using grammar::GrammarConstraint;
using grammar::GrammarVocab;
using grammar::TokenKind;

constexpr int32_t kVocabSize = 151936;

std::string VocabDir() {
  const char* dir = std::getenv("MATRICXON_REF_DIR");
  return std::string(dir != nullptr ? dir : MATRICXON_REF_DIR) + "/../vocab";
}

std::shared_ptr<const GrammarVocab> BigVocab() {
  static std::shared_ptr<const GrammarVocab> vocab = [] {
    std::vector<std::string> pieces;
    std::vector<TokenKind> kinds;
    std::set<std::string> seen;
    std::vector<std::string> text_pieces;
    for (const char* name : {"deepseek-llm", "gpt-2", "deepseek-coder", "llama-spm", "phi-3"}) {
      auto file =
          gguf::GgufFile::Open(Env::Default(), VocabDir() + "/ggml-vocab-" + name + ".gguf");
      if (!file.ok()) continue;
      auto tok = tokenizer::TokenizerFromGguf(**file);
      if (!tok.ok()) continue;
      auto gv = grammar::GrammarVocabFromTokenizer(**tok).value();
      for (int32_t id = 0; id < gv->n_vocab() && pieces.size() < kVocabSize; ++id) {
        if (!seen.insert(gv->bytes(id)).second) continue;
        pieces.push_back(gv->bytes(id));
        kinds.push_back(gv->kind(id));
        if (gv->kind(id) == TokenKind::kText) text_pieces.push_back(gv->bytes(id));
      }
    }
    for (size_t i = 0; pieces.size() < kVocabSize && i < text_pieces.size(); ++i) {
      std::string spaced = " " + text_pieces[i];
      if (seen.insert(spaced).second) {
        pieces.push_back(spaced);
        kinds.push_back(TokenKind::kText);
      }
    }
    return GrammarVocab::Create(std::move(pieces), std::move(kinds)).value();
  }();
  return vocab;
}

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},
  "age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","maxLength":64},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}},
             "required":["city"]},
  "score":{"type":"number"}},
 "required":["name","age"]})";

// The reply so far at each point, and a plausible next piece.
struct Point {
  const char* prefix;
  const char* next;
};
const Point kPoints[] = {
    {R"({"name":"Jonathan Wi)", "lliams"},         // inside a string
    {R"({"name":"Jo","age":31,)", " \""},          // between properties
    {R"({"name":"Jo","age":31,"score":3)", "14"},  // inside a number
};

std::unique_ptr<GrammarConstraint> At(const Point& p) {
  auto vocab = BigVocab();
  auto g = grammar::CompileJsonSchema(nlohmann::ordered_json::parse(kSchema)).value();
  auto c = GrammarConstraint::Create(g, vocab).value();
  // Feed the prefix byte by byte through one-byte tokens looked up by bytes.
  for (char ch : std::string(p.prefix)) {
    for (int32_t t = 0; t < vocab->n_vocab(); ++t) {
      if (vocab->bytes(t) == std::string(1, ch) && vocab->kind(t) == TokenKind::kText) {
        c->Accept(t);
        break;
      }
    }
  }
  return c;
}

int32_t FindToken(const std::string& bytes) {
  auto vocab = BigVocab();
  for (int32_t t = 0; t < vocab->n_vocab(); ++t) {
    if (vocab->bytes(t) == bytes) return t;
  }
  return 0;
}

void BM_Allows(benchmark::State& state) {
  const Point& p = kPoints[state.range(0)];
  auto c = At(p);
  const int32_t t = FindToken(p.next);
  if (!c->Allows(t)) state.SkipWithError("the plausible next token is not allowed");
  for (auto _ : state) benchmark::DoNotOptimize(c->Allows(t));
  state.SetLabel(p.prefix);
}

void BM_MaskCold(benchmark::State& state) {
  auto c = At(kPoints[state.range(0)]);
  std::vector<float> logits(BigVocab()->n_vocab(), 0.0f);
  for (auto _ : state) {
    state.PauseTiming();
    auto fresh = c->Clone();
    state.ResumeTiming();
    fresh->Mask(logits);
  }
  state.SetLabel(kPoints[state.range(0)].prefix);
}

void BM_MaskWalk(benchmark::State& state) {
  auto c = At(kPoints[state.range(0)]);
  std::vector<float> logits(BigVocab()->n_vocab(), 0.0f);
  c->Mask(logits);
  size_t allowed = 0;
  for (float x : logits) allowed += x == 0.0f;
  for (auto _ : state) {
    c->ForgetMasks();
    c->Mask(logits);
  }
  state.counters["allowed"] = static_cast<double>(allowed);
  state.SetLabel(kPoints[state.range(0)].prefix);
}

void BM_MaskCached(benchmark::State& state) {
  auto c = At(kPoints[state.range(0)]);
  std::vector<float> logits(BigVocab()->n_vocab(), 0.0f);
  c->Mask(logits);
  for (auto _ : state) c->Mask(logits);
  state.SetLabel(kPoints[state.range(0)].prefix);
}

void BM_BuildVocab(benchmark::State& state) {
  auto v = BigVocab();
  std::vector<std::string> pieces;
  std::vector<TokenKind> kinds;
  for (int32_t t = 0; t < v->n_vocab(); ++t) {
    pieces.push_back(v->bytes(t));
    kinds.push_back(v->kind(t));
  }
  for (auto _ : state) benchmark::DoNotOptimize(GrammarVocab::Create(pieces, kinds));
  state.counters["tokens"] = v->n_vocab();
  state.counters["trie_nodes"] = static_cast<double>(v->trie().size());
}

void BM_CompileSchema(benchmark::State& state) {
  const auto schema = nlohmann::ordered_json::parse(kSchema);
  for (auto _ : state) benchmark::DoNotOptimize(grammar::CompileJsonSchema(schema));
}

BENCHMARK(BM_Allows)->DenseRange(0, 2)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_MaskCold)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskWalk)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskCached)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuildVocab)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mx::bench

BENCHMARK_MAIN();
