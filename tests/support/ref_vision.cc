#include "ref_vision.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ref_data.h"

namespace mx::testing {
namespace {

nlohmann::json VisionJson() {
  std::ifstream in(RefDir() + "/ref-tiny-qwen35-vision.json");
  if (!in) {
    ADD_FAILURE() << "missing ref-tiny-qwen35-vision.json in " << RefDir();
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(in);
}

}  // namespace

std::string VisionLmPath() { return RefDir() + "/models/tiny-qwen35.gguf"; }
std::string VisionMmprojPath() { return RefDir() + "/models/tiny-qwen35-mmproj.gguf"; }

std::vector<RefVisionRun> LoadVisionRuns() {
  const nlohmann::json j = VisionJson();
  std::vector<RefVisionRun> out;
  if (!j.contains("runs")) return out;
  for (const auto& r : j["runs"]) {
    RefVisionRun run;
    run.name = r["name"].get<std::string>();
    if (r["image"].is_string()) run.image = r["image"].get<std::string>();
    run.text = r["text"].get<std::string>();
    for (const auto& m : r["messages"]) {
      if (m["role"] == "user") run.user_text = m["content"].get<std::string>();
      if (m["role"] == "system") run.system_text = m["content"].get<std::string>();
    }
    const auto& rows = r["rows"];
    for (const auto& t : rows["token"]) run.tokens.push_back(t.get<int32_t>());
    for (const auto& p : rows["pos_thwe"]) {
      run.pos_thwe.push_back(
          {p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].get<int64_t>(), p[3].get<int64_t>()});
    }
    for (const auto& c : r["chunks"]) {
      if (c["type"] != "image") continue;
      run.image_first_row = c["first_row"].get<int64_t>();
      run.nx = c["nx"].get<int64_t>();
      run.ny = c["ny"].get<int64_t>();
      run.n_pos = c["n_pos"].get<int64_t>();
      run.embeddings_file = RefDir() + "/" + c["embeddings_file"].get<std::string>();
    }
    run.n_past_after_prompt = r["n_past_after_prompt"].get<int64_t>();
    run.logits_file = RefDir() + "/" + r["logits_file"].get<std::string>();
    for (const auto& t : r["greedy"]["tokens"]) run.greedy.push_back(t.get<int32_t>());
    for (const auto& m : r["greedy"]["margin_top1_top2"])
      run.greedy_margins.push_back(m.get<float>());
    out.push_back(std::move(run));
  }
  return out;
}

RefVisionImage LoadVisionImage(const std::string& name) {
  const nlohmann::json j = VisionJson();
  RefVisionImage img;
  if (!j.contains("images") || !j["images"].contains(name)) {
    ADD_FAILURE() << "no image " << name << " in the vision reference";
    return img;
  }
  const auto& i = j["images"][name];
  img.png = RefDir() + "/" + i["file"].get<std::string>();
  img.width = i["width"].get<int64_t>();
  img.height = i["height"].get<int64_t>();
  img.prep_width = i["preprocessed"]["width"].get<int64_t>();
  img.prep_height = i["preprocessed"]["height"].get<int64_t>();
  img.pixels = RefDir() + "/" + i["preprocessed"]["file"].get<std::string>();
  return img;
}

std::vector<float> ReadF32File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  in.seekg(0, std::ios::end);
  const auto bytes = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> v(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

}  // namespace mx::testing
