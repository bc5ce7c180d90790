// Test support: reads ../shared/ref (llama.cpp's reference outputs for the
// tiny GGUF models; see ../shared/ref/README.md). Test-only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mx::testing {

struct RefGreedy {
  std::vector<int32_t> tokens;
  std::vector<float> margin_top1_top2;
};

struct RefPrompt {
  std::string name;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> last_logits;
  std::vector<int32_t> argmax_per_position;
  std::vector<std::vector<std::pair<int32_t, float>>> top5_per_position;
  RefGreedy greedy;
  // dequantized_f32_reference (F16/BF16/quantized models only; empty otherwise)
  std::vector<float> deq_last_logits;
  std::vector<int32_t> deq_argmax_per_position;
  std::vector<std::vector<std::pair<int32_t, float>>> deq_top5_per_position;
  // For the hybrid model's chunking checks.
  int64_t chunk_split = 0;
  std::vector<float> last_logits_after_chunk1;
};

// One turn of the reference's 3-turn conversation (ref/README-dense.md):
// its prompt decoded fresh, then `greedy` tokens; from turn 2 on, n_kept =
// the tokens shared with the memory turn k-1 left (its prompt + greedy).
struct RefTurn {
  std::vector<int32_t> tokens;
  std::vector<float> last_logits;
  RefGreedy greedy;
  int64_t n_kept = 0;  // 0 for turn 1 (and where the reference has no from_previous_memory)
};

struct RefModel {
  std::string name;        // "tiny-llama"
  std::string model_path;  // .../models/tiny-llama.gguf
  bool add_bos = false;
  std::vector<RefPrompt> prompts;
  std::vector<RefTurn> conversation;  // empty when the reference has none
  const RefPrompt& prompt(const std::string& name) const;
};

// routing-<model>.json (ref/README-moe.md): the experts llama.cpp chose at
// every position of every MoE layer of each prompt, best first.
struct RefRoutingLayer {
  int64_t layer = 0;
  std::vector<std::vector<int32_t>> experts;  // [position][k]
  std::vector<std::vector<float>> weights;    // [position][k]
  std::vector<float> gap;                     // [position] k-th minus next score
};
struct RefRoutingPrompt {
  std::string name;
  std::vector<int32_t> tokens;
  std::vector<RefRoutingLayer> layers;
};
struct RefRouting {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  std::vector<RefRoutingPrompt> prompts;
  const RefRoutingPrompt* prompt(const std::string& name) const;
};
// Empty (no prompts) when the set has no routing file.
RefRouting LoadRefRouting(const std::string& name);

std::string RefDir();
// Loads ref-<name>.json. Aborts the test (ADD_FAILURE + empty) when missing.
RefModel LoadRefModel(const std::string& name);
// Raw logits file logits/<model>.chat.f32 as [n_tokens][n_vocab].
std::vector<float> LoadAllLogits(const std::string& model_name);

}  // namespace mx::testing
