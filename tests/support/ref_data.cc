#include "ref_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "derived_models.h"

namespace mx::testing {
namespace {

std::vector<std::vector<std::pair<int32_t, float>>> ReadTop5(const nlohmann::json& j) {
  std::vector<std::vector<std::pair<int32_t, float>>> out;
  for (const auto& pos : j) {
    std::vector<std::pair<int32_t, float>> row;
    for (const auto& pair : pos) row.emplace_back(pair[0].get<int32_t>(), pair[1].get<float>());
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

std::string RefDir() { return MATRICXON_REF_DIR; }

const RefPrompt& RefModel::prompt(const std::string& name) const {
  for (const auto& p : prompts) {
    if (p.name == name) return p;
  }
  static RefPrompt empty;
  ADD_FAILURE() << "no prompt " << name;
  return empty;
}

RefModel LoadRefModel(const std::string& name) {
  RefModel m;
  m.name = name;
  m.model_path = RefDir() + "/models/" + name + ".gguf";
  std::string json_path = RefDir() + "/ref-" + name + ".json";
  if (IsDerivedModel(name)) {
    // Written afresh from its ../shared/ref source; the reference was
    // computed from these exact bytes.
    json_path = std::string(MATRICXON_PROJECT_REF_DIR) + "/ref-" + name + ".json";
    std::filesystem::create_directories(MATRICXON_DERIVED_MODELS_DIR);
    m.model_path = std::string(MATRICXON_DERIVED_MODELS_DIR) + "/" + name + ".gguf";
    if (std::string err = WriteDerivedModel(name, m.model_path); !err.empty()) {
      ADD_FAILURE() << "cannot write the derived model " << name << ": " << err;
      return m;
    }
  }
  std::ifstream in(json_path);
  if (!in) {
    ADD_FAILURE() << "cannot read " << json_path;
    return m;
  }
  nlohmann::json j = nlohmann::json::parse(in);
  if (IsDerivedModel(name) && j.value("model_sha256", "") != FileSha256(m.model_path)) {
    ADD_FAILURE() << m.model_path << " is not the file " << json_path
                  << " was computed from (model_sha256): the derivation changed; recompute the "
                     "reference with llama.cpp (tests/data/ref/README.md)";
    return m;
  }
  // The file the set was made from, relative to the reference folder (the
  // low-bit sets' models live in quant/models/).
  if (!IsDerivedModel(name) && j.contains("model") && j["model"].is_string())
    m.model_path = RefDir() + "/" + j["model"].get<std::string>();
  m.add_bos = j.value("add_bos", false);
  for (const auto& p : j["prompts"]) {
    RefPrompt r;
    r.name = p["name"].get<std::string>();
    r.text = p["text"].get<std::string>();
    r.tokens = p["tokens"].get<std::vector<int32_t>>();
    r.last_logits = p["last_logits"].get<std::vector<float>>();
    r.argmax_per_position = p["argmax_per_position"].get<std::vector<int32_t>>();
    r.top5_per_position = ReadTop5(p["top5_per_position"]);
    r.greedy.tokens = p["greedy"]["tokens"].get<std::vector<int32_t>>();
    r.greedy.margin_top1_top2 = p["greedy"]["margin_top1_top2"].get<std::vector<float>>();
    if (p.contains("dequantized_f32_reference") && !p["dequantized_f32_reference"].is_null()) {
      const auto& d = p["dequantized_f32_reference"];
      r.deq_last_logits = d["last_logits"].get<std::vector<float>>();
      r.deq_argmax_per_position = d["argmax_per_position"].get<std::vector<int32_t>>();
      r.deq_top5_per_position = ReadTop5(d["top5_per_position"]);
    }
    if (p.contains("chunked")) {
      const auto& c = p["chunked"];
      r.chunk_split = c.value("split", 0);
      if (c.contains("last_logits_after_chunk1")) {
        r.last_logits_after_chunk1 = c["last_logits_after_chunk1"].get<std::vector<float>>();
      }
    }
    m.prompts.push_back(std::move(r));
  }
  if (j.contains("conversation") && j["conversation"].contains("turns")) {
    for (const auto& t : j["conversation"]["turns"]) {
      RefTurn r;
      r.tokens = t["tokens"].get<std::vector<int32_t>>();
      r.last_logits = t["last_logits"].get<std::vector<float>>();
      r.greedy.tokens = t["greedy"]["tokens"].get<std::vector<int32_t>>();
      r.greedy.margin_top1_top2 = t["greedy"]["margin_top1_top2"].get<std::vector<float>>();
      const auto prev = t.find("from_previous_memory");
      if (prev != t.end() && prev->is_object()) r.n_kept = (*prev)["n_kept"].get<int64_t>();
      m.conversation.push_back(std::move(r));
    }
  }
  return m;
}

const RefRoutingPrompt* RefRouting::prompt(const std::string& name) const {
  for (const auto& p : prompts) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

RefRouting LoadRefRouting(const std::string& name) {
  RefRouting r;
  std::ifstream in(RefDir() + "/routing-" + name + ".json");
  if (!in) return r;
  const nlohmann::json j = nlohmann::json::parse(in);
  r.n_expert = j["n_expert"].get<int64_t>();
  r.n_expert_used = j["n_expert_used"].get<int64_t>();
  for (const auto& p : j["prompts"]) {
    RefRoutingPrompt rp;
    rp.name = p["name"].get<std::string>();
    rp.tokens = p["tokens"].get<std::vector<int32_t>>();
    for (const auto& l : p["moe_layers"]) {
      RefRoutingLayer rl;
      rl.layer = l["layer"].get<int64_t>();
      rl.experts = l["experts"].get<std::vector<std::vector<int32_t>>>();
      rl.weights = l["weights"].get<std::vector<std::vector<float>>>();
      rl.gap = l["gap_kth_vs_next"].get<std::vector<float>>();
      rp.layers.push_back(std::move(rl));
    }
    r.prompts.push_back(std::move(rp));
  }
  return r;
}

std::vector<float> LoadAllLogits(const std::string& model_name) {
  std::ifstream in(RefDir() + "/logits/" + model_name + ".chat.f32", std::ios::binary);
  std::vector<float> out;
  if (!in) return out;
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  out.resize(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace mx::testing
