#include "models/synthetic_projector.h"
#include "models/synthetic_random.h"

#include <cmath>

#include "gguf/gguf_writer.h"
#include "kernels/kernels.h"

namespace mx::models {
namespace {

using synthetic::HashName;
using synthetic::Rng;

// llama_ftype numbering, as the converter writes general.file_type.
uint32_t FileType(DType t) {
  switch (t) {
    case DType::kF16:
      return 1;
    case DType::kQ8_0:
      return 7;
    default:
      return 0;
  }
}

// One tensor to write: values 1 + 0.1 N(0, 1) for a norm weight, else
// std * N(0, 1).
struct TensorPlan {
  ProjectorTensor tensor;
  float std = 0;
  bool norm_weight = false;
};

std::string Blk(int64_t i, const char* name) { return "v.blk." + std::to_string(i) + "." + name; }

// Every tensor, in the order of the converter's files.
std::vector<TensorPlan> PlanTensors(const SyntheticProjectorSpec& s) {
  const int64_t e = s.n_embd, p = s.patch_size;
  const int64_t merged = e * s.spatial_merge * s.spatial_merge;  // the merger's input row
  const DType w = s.weight_type;
  // The converter keeps patch kernels F16 in an F16 file and F32 otherwise.
  const DType kernel = w == DType::kF16 ? DType::kF16 : DType::kF32;
  auto matrix = [&](std::string name, int64_t in, int64_t out) {
    return TensorPlan{{std::move(name), w, {in, out}}, 1 / std::sqrt(static_cast<float>(in))};
  };
  auto vec = [](std::string name, int64_t n, float std) {
    return TensorPlan{{std::move(name), DType::kF32, {n}}, std};
  };
  auto norm = [&](const std::string& prefix, std::vector<TensorPlan>* plan) {
    plan->push_back({{prefix + ".weight", DType::kF32, {e}}, 0, true});
    plan->push_back(vec(prefix + ".bias", e, 0.1f));
  };

  std::vector<TensorPlan> plan;
  const float kernel_std = 1 / std::sqrt(static_cast<float>(3 * p * p));
  plan.push_back({{"v.patch_embd.weight", kernel, {p, p, 3, e}}, kernel_std});    // frame 0
  plan.push_back({{"v.patch_embd.weight.1", kernel, {p, p, 3, e}}, kernel_std});  // frame 1
  plan.push_back(vec("v.patch_embd.bias", e, 0.2f));
  plan.push_back({{"v.position_embd.weight", DType::kF32, {e, s.pos_grid * s.pos_grid}}, 0.5f});
  for (int64_t i = 0; i < s.n_block; ++i) {
    norm(Blk(i, "ln1"), &plan);
    norm(Blk(i, "ln2"), &plan);
    plan.push_back(matrix(Blk(i, "attn_qkv.weight"), e, 3 * e));  // rows q | k | v
    plan.push_back(vec(Blk(i, "attn_qkv.bias"), 3 * e, 0.2f));
    plan.push_back(matrix(Blk(i, "attn_out.weight"), e, e));
    plan.push_back(vec(Blk(i, "attn_out.bias"), e, 0.1f));
    plan.push_back(matrix(Blk(i, "ffn_up.weight"), e, s.n_ff));
    plan.push_back(vec(Blk(i, "ffn_up.bias"), s.n_ff, 0.1f));
    plan.push_back(matrix(Blk(i, "ffn_down.weight"), s.n_ff, e));
    plan.push_back(vec(Blk(i, "ffn_down.bias"), e, 0.1f));
  }
  norm("v.post_ln", &plan);  // the merger's norm
  plan.push_back(matrix("mm.0.weight", merged, merged));
  plan.push_back(vec("mm.0.bias", merged, 0.1f));
  plan.push_back(matrix("mm.2.weight", merged, s.projection_dim));
  plan.push_back(vec("mm.2.bias", s.projection_dim, 0.1f));
  return plan;
}

// The keys in the converter's order (ref/tiny-qwen35-mmproj.gguf's).
void WriteMetadata(const SyntheticProjectorSpec& s, gguf::GgufWriter* w) {
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w->SetString("general.architecture", "clip");
  w->SetString("general.name", s.name);
  w->SetU32("general.file_type", FileType(s.weight_type));
  w->SetString("general.type", "mmproj");
  w->SetBool("clip.has_vision_encoder", true);
  w->SetU32("clip.vision.projection_dim", u32(s.projection_dim));
  // The converter derives image_size from the grid; qwen3vl_merger ignores it.
  w->SetU32("clip.vision.image_size", u32(s.pos_grid * s.patch_size));
  w->SetU32("clip.vision.patch_size", u32(s.patch_size));
  w->SetU32("clip.vision.embedding_length", u32(s.n_embd));
  w->SetU32("clip.vision.feed_forward_length", u32(s.n_ff));
  w->SetU32("clip.vision.block_count", u32(s.n_block));
  w->SetU32("clip.vision.attention.head_count", u32(s.n_head));
  w->SetF32Array("clip.vision.image_mean", {s.image_mean.begin(), s.image_mean.end()});
  w->SetF32Array("clip.vision.image_std", {s.image_std.begin(), s.image_std.end()});
  w->SetString("clip.projector_type", "qwen3vl_merger");
  w->SetBool("clip.use_gelu", true);  // without it libmtmd uses gelu_quick
  w->SetU32("clip.vision.spatial_merge_size", u32(s.spatial_merge));
  w->SetF32("clip.vision.attention.layer_norm_epsilon", s.layer_norm_eps);
}

}  // namespace

std::vector<std::string> SyntheticProjectorPresetNames() { return {"tiny-qwen35", "qwen3.5-0.8b"}; }

Result<SyntheticProjectorSpec> SyntheticProjectorPreset(std::string_view preset) {
  SyntheticProjectorSpec s;
  s.name = std::string(preset) + "-mmproj";
  if (preset == "tiny-qwen35") return s;  // the defaults are ref/tiny-qwen35-mmproj's shape
  if (preset == "qwen3.5-0.8b") {
    // Qwen3.5-0.8B's vision_config: depth 12, hidden_size 768, num_heads 12,
    // intermediate_size 3072, num_position_embeddings 2304 (48 x 48),
    // out_hidden_size 1024, patch_size 16, spatial_merge_size 2,
    // temporal_patch_size 2; its image processor's mean/std are 0.5.
    s.n_embd = 768, s.n_head = 12, s.n_ff = 3072, s.n_block = 12, s.pos_grid = 48;
    s.projection_dim = 1024;
    s.image_mean = {0.5f, 0.5f, 0.5f}, s.image_std = {0.5f, 0.5f, 0.5f};
    s.weight_type = DType::kF16;  // as the published mmproj files
    return s;
  }
  std::string names;
  for (const auto& n : SyntheticProjectorPresetNames()) names += (names.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("no vision projector for preset '" + std::string(preset) +
                                 "' (presets with one: " + names + ")");
}

Status ValidateSyntheticProjectorSpec(const SyntheticProjectorSpec& s) {
  auto fail = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("projector " + field + ": " + why);
  };
  const struct {
    const char* field;
    int64_t v, max;
  } kSizes[] = {{"patch-size", s.patch_size, 256},
                {"width", s.n_embd, 65536},
                {"heads", s.n_head, 1024},
                {"ffn", s.n_ff, 1 << 20},
                {"blocks", s.n_block, 512},
                {"position-grid", s.pos_grid, 1024},
                {"projection-dim", s.projection_dim, 65536}};
  for (const auto& [field, v, max] : kSizes) {
    if (v <= 0 || v > max) {
      return fail(field, std::to_string(v) + ", expected 1.." + std::to_string(max));
    }
  }
  if (s.spatial_merge != 2) {
    return fail("spatial-merge", std::to_string(s.spatial_merge) +
                                     ", expected 2 (llama.cpp's qwen3vl graph merges 2x2 patches)");
  }
  if (s.n_embd % s.n_head != 0 || (s.n_embd / s.n_head) % 4 != 0) {
    return fail("heads", "width " + std::to_string(s.n_embd) + " / " + std::to_string(s.n_head) +
                             " heads must give a head width that is a multiple of 4 (2-D RoPE)");
  }
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite(s.image_mean[c]) || !std::isfinite(s.image_std[c]) ||
        !(s.image_std[c] > 0)) {
      return fail("image-mean/std", "channel " + std::to_string(c) + " mean " +
                                        std::to_string(s.image_mean[c]) + " std " +
                                        std::to_string(s.image_std[c]) +
                                        ", expected finite values and std > 0");
    }
  }
  if (!std::isfinite(s.layer_norm_eps) || !(s.layer_norm_eps > 0)) {
    return fail("layer-norm-eps", std::to_string(s.layer_norm_eps) + ", expected > 0");
  }
  const DType w = s.weight_type;
  if (w != DType::kF32 && w != DType::kF16 && w != DType::kQ8_0) {
    return fail("weight type", DTypeName(w) + ", expected F32, F16 or Q8_0");
  }
  const int64_t block = GetDTypeInfo(w).block_values;
  for (const TensorPlan& p : PlanTensors(s)) {
    if (p.tensor.type == w && p.tensor.shape[0] % block != 0) {
      return fail("weight type", DTypeName(w) + " needs rows that are a multiple of " +
                                     std::to_string(block) + " values; " + p.tensor.name +
                                     " has rows of " + std::to_string(p.tensor.shape[0]));
    }
  }
  return Status::Ok();
}

std::vector<ProjectorTensor> SyntheticProjectorTensors(const SyntheticProjectorSpec& spec) {
  std::vector<ProjectorTensor> out;
  for (TensorPlan& p : PlanTensors(spec)) out.push_back(std::move(p.tensor));
  return out;
}

Status WriteSyntheticProjector(Env* env, const SyntheticProjectorSpec& s, const std::string& path,
                               const std::function<void(uint64_t, uint64_t)>& progress) {
  MX_RETURN_IF_ERROR(ValidateSyntheticProjectorSpec(s));
  gguf::GgufWriter w;
  WriteMetadata(s, &w);
  gguf::Value deepstack;  // written by the converter (one flag per block), not read
  deepstack.type = gguf::ValueType::kArray;
  deepstack.array_type = gguf::ValueType::kBool;
  deepstack.ints.assign(static_cast<size_t>(s.n_block), 0);
  MX_RETURN_IF_ERROR(w.SetValue("clip.vision.is_deepstack_layers", deepstack));

  const std::vector<TensorPlan> plan = PlanTensors(s);
  auto n_values = [](const ProjectorTensor& t) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    return n;
  };
  uint64_t total = 0, done = 0;
  for (const TensorPlan& p : plan) total += static_cast<uint64_t>(n_values(p.tensor));
  std::vector<float> row;
  for (const TensorPlan& p : plan) {
    const ProjectorTensor& t = p.tensor;
    Rng rng(HashName(s.seed, t.name));
    const int64_t cols = t.shape[0], rows = n_values(t) / cols;
    const size_t rb = RowBytes(t.type, cols);
    std::string bytes(rb * static_cast<size_t>(rows), '\0');
    row.resize(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = p.norm_weight ? 1.0f + 0.1f * rng.Normal() : p.std * rng.Normal();
      kernels::QuantizeRow(t.type, row.data(),
                           reinterpret_cast<uint8_t*>(bytes.data()) + static_cast<size_t>(r) * rb,
                           cols);
    }
    MX_RETURN_IF_ERROR(w.AddTensor(t.name, t.type, t.shape, std::move(bytes)));
    done += static_cast<uint64_t>(n_values(t));
    if (progress) progress(done, total);
  }
  return w.WriteTo(env, path);
}

std::string DefaultProjectorPath(const std::string& model_path) {
  constexpr std::string_view kExt = ".gguf";
  std::string stem = model_path;
  if (stem.size() > kExt.size() && stem.ends_with(kExt)) stem.resize(stem.size() - kExt.size());
  return stem + ".mmproj.gguf";
}

}  // namespace mx::models
