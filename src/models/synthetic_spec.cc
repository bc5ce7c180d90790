// The synthetic model's presets and the checks of a spec (synthetic_model.h);
// the writer is synthetic_model.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "models/synthetic_model.h"
#include "models/synthetic_qwen35.h"

namespace mx::models {

std::vector<std::string> SyntheticPresetNames() {
  return {"tiny",          "tiny-hybrid",          "tiny-qwen35",     "smollm2-135m",
          "qwen3-0.6b",    "qwen3.5-0.8b",         "llama-135m",      "llama-3.2-1b",
          "phi-4-mini",    "tiny-gemma3",          "gemma-3-1b",      "tiny-qwen3moe",
          "qwen3-30b-a3b", "qwen3-moe-bench",      "qwen3.5-35b-a3b", "qwen3.5-moe-bench",
          "nemotron-3-nano", "nemotron-3-moe-bench", "gpt-oss-20b",   "gpt-oss-bench"};
}

std::string_view SyntheticTrunk(const SyntheticSpec& s) {
  if (s.arch == "qwen3moe") return "qwen3";
  if (s.arch == "qwen35moe") return "qwen35";
  if (s.arch == "nemotron_h_moe") return "nemotron_h";
  return s.arch;
}

bool SyntheticMoe(const SyntheticSpec& s) {
  return s.arch == "qwen3moe" || s.arch == "qwen35moe" || s.arch == "nemotron_h_moe" ||
         s.arch == "gpt-oss";
}

namespace {

// The mixtures of experts' presets: the real shapes and their bench shapes
// (the real layer structure, expert count and top-k, narrower).
bool MoePreset(std::string_view preset, SyntheticSpec& s) {
  // Nemotron 3 Nano 30B-A3B's 52 layers: Mamba2, MoE and 6 attention layers.
  constexpr const char* kNemotronNanoPattern =
      "M-M-M*-M-M-M*-M-M-M*-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M-";
  if (preset == "tiny-qwen3moe") {  // the shape of ref/tiny-qwen3moe
    s.arch = "qwen3moe";
    s.n_layer = 4, s.n_embd = 64, s.n_head = 4, s.n_kv_head = 2, s.head_dim = 32, s.n_ff = 192;
    s.n_expert = 8, s.n_expert_used = 2, s.n_ff_expert = 32, s.tied_embeddings = true;
  } else if (preset == "qwen3-30b-a3b" || preset == "qwen3-moe-bench") {  // Qwen3-30B-A3B
    s.arch = "qwen3moe";
    s.n_layer = 48, s.n_embd = 2048, s.n_head = 32, s.n_kv_head = 4, s.head_dim = 128;
    s.n_ff = 6144, s.n_expert = 128, s.n_expert_used = 8, s.n_ff_expert = 768;
    s.n_vocab = 151936, s.n_ctx = 40960;
    if (preset == "qwen3-moe-bench") {
      s.n_embd = 512, s.n_head = 8, s.n_kv_head = 1, s.head_dim = 64, s.n_ff = 1536;
      s.n_ff_expert = 256, s.n_vocab = 16384;
    }
  } else if (preset == "qwen3.5-35b-a3b" || preset == "qwen3.5-moe-bench") {  // Qwen3.5-35B-A3B
    s.arch = "qwen35moe";
    s.n_layer = 40, s.n_embd = 2048, s.n_head = 16, s.n_kv_head = 2, s.head_dim = 256;
    s.n_expert = 256, s.n_expert_used = 8, s.n_ff_expert = 512, s.n_ff_shared = 512;
    s.n_vocab = 248320, s.n_ctx = 262144, s.rope_theta = 1e7f, s.rope_dims = 64;
    s.rope_sections = {11, 11, 10, 0}, s.full_attention_interval = 4, s.ssm_conv = 4;
    s.linear_key_heads = 16, s.linear_value_heads = 32, s.linear_head_dim = 128;
    if (preset == "qwen3.5-moe-bench") {
      s.n_embd = 512, s.n_head = 8, s.n_kv_head = 1, s.head_dim = 128, s.rope_dims = 32;
      s.rope_sections = {6, 5, 5, 0}, s.n_ff_expert = 128, s.n_ff_shared = 128;
      s.linear_key_heads = 4, s.linear_value_heads = 8, s.linear_head_dim = 64;
      s.n_vocab = 16384;
    }
  } else if (preset == "nemotron-3-nano" || preset == "nemotron-3-moe-bench") {
    s.arch = "nemotron_h_moe";  // Nemotron 3 Nano 30B-A3B
    s.n_layer = 52, s.layer_pattern = kNemotronNanoPattern, s.n_embd = 2688, s.n_head = 32;
    s.n_kv_head = 2, s.head_dim = 128, s.n_expert = 128, s.n_expert_used = 6;
    s.n_ff_expert = 1856, s.n_ff_shared = 3712, s.n_ff = 1856, s.expert_weights_scale = 2.5f;
    s.mamba_inner = 4096, s.ssm_head_dim = 64, s.ssm_groups = 8, s.ssm_state = 128;
    s.n_vocab = 131072, s.n_ctx = 262144;
    if (preset == "nemotron-3-moe-bench") {
      s.n_embd = 512, s.n_head = 8, s.n_kv_head = 1, s.head_dim = 64, s.n_ff_expert = 256;
      s.n_ff = 256, s.n_ff_shared = 512, s.mamba_inner = 1024, s.ssm_state = 64;
      s.n_vocab = 16384;
    }
  } else if (preset == "gpt-oss-20b" || preset == "gpt-oss-bench") {  // gpt-oss-20b
    s.arch = "gpt-oss";
    s.n_layer = 24, s.n_embd = 2880, s.n_head = 64, s.n_kv_head = 8, s.head_dim = 64;
    s.n_expert = 32, s.n_expert_used = 4, s.n_ff_expert = 2880, s.n_ff = 2880;
    s.n_vocab = 201088, s.n_ctx = 131072, s.rope_theta = 150000, s.sliding_window = 128;
    if (preset == "gpt-oss-bench") {
      s.n_embd = 512, s.n_head = 8, s.n_kv_head = 1, s.n_ff_expert = 512, s.n_ff = 512;
      s.n_vocab = 16384;
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<SyntheticSpec> SyntheticPreset(std::string_view preset) {
  // The names earlier releases used.
  if (preset == "llama3.2-1b") preset = "llama-3.2-1b";
  if (preset == "phi4-mini") preset = "phi-4-mini";
  SyntheticSpec s;
  s.name = std::string(preset);
  if (preset == "tiny") return s;
  if (preset == "smollm2-135m") {
    s.arch = "llama";
    s.n_layer = 30, s.n_embd = 576, s.n_head = 9, s.n_kv_head = 3, s.n_ff = 1536;
    s.n_vocab = 49152, s.n_ctx = 8192, s.tied_embeddings = true, s.rope_theta = 100000;
    return s;
  }
  if (preset == "qwen3-0.6b") {
    s.arch = "qwen3";
    s.n_layer = 28, s.n_embd = 1024, s.n_head = 16, s.n_kv_head = 8, s.head_dim = 128;
    s.n_ff = 3072, s.n_vocab = 151936, s.n_ctx = 40960, s.tied_embeddings = true;
    return s;
  }
  if (preset == "tiny-hybrid") {  // the shape of ref/tiny-hybrid-nemotron_h
    s.arch = "nemotron_h";
    s.n_layer = 8, s.n_embd = 128, s.n_head = 4, s.n_kv_head = 2, s.n_ff = 256;
    return s;
  }
  if (preset == "tiny-qwen35") {  // the shape and metadata of ref/tiny-qwen35
    s.arch = "qwen35";
    s.n_layer = 8, s.n_embd = 128, s.n_head = 4, s.n_kv_head = 2, s.head_dim = 64, s.n_ff = 256;
    s.tied_embeddings = true, s.rope_theta = 1e7f, s.rope_dims = 16, s.rope_sections = {3, 3, 2, 0};
    s.full_attention_interval = 4, s.ssm_conv = 4;
    s.linear_key_heads = 2, s.linear_value_heads = 4, s.linear_head_dim = 32;
    return s;
  }
  if (preset == "qwen3.5-0.8b") {  // Qwen3.5-0.8B's text model
    s.arch = "qwen35";
    s.n_layer = 24, s.n_embd = 1024, s.n_head = 8, s.n_kv_head = 2, s.head_dim = 256;
    s.n_ff = 3584, s.n_vocab = 248320, s.n_ctx = 262144, s.tied_embeddings = true;
    s.rope_theta = 1e7f, s.rope_dims = 64, s.rope_sections = {11, 11, 10, 0};
    s.full_attention_interval = 4, s.ssm_conv = 4;
    s.linear_key_heads = 16, s.linear_value_heads = 16, s.linear_head_dim = 128;
    return s;
  }
  if (preset == "llama-135m") {
    s.arch = "llama";
    s.n_layer = 12, s.n_embd = 768, s.n_head = 12, s.n_kv_head = 12, s.n_ff = 2048;
    s.n_vocab = 32000, s.n_ctx = 2048;
    return s;
  }
  if (preset == "llama-3.2-1b") {  // Llama-3.2-1B: rope_scaling llama3, factor 32 from 8192
    s.arch = "llama";
    s.n_layer = 16, s.n_embd = 2048, s.n_head = 32, s.n_kv_head = 8, s.head_dim = 64;
    s.n_ff = 8192, s.n_vocab = 128256, s.n_ctx = 131072, s.tied_embeddings = true;
    s.rope_theta = 500000, s.llama3_rope_factor = 32, s.llama3_low_freq_factor = 1;
    s.llama3_high_freq_factor = 4, s.rope_orig_ctx = 8192;
    return s;
  }
  if (preset == "phi-4-mini") {  // Phi-4-mini-instruct: 3/4 of each head rotated, LongRoPE from 4096
    s.arch = "phi3";
    s.n_layer = 32, s.n_embd = 3072, s.n_head = 24, s.n_kv_head = 8, s.n_ff = 8192;
    s.n_vocab = 200064, s.n_ctx = 131072, s.tied_embeddings = true, s.rope_theta = 10000;
    s.rope_dims = 96, s.rope_orig_ctx = 4096, s.sliding_window = 0;
    return s;
  }
  if (preset == "tiny-gemma3") {  // the shape of ref/tiny-gemma3
    s.arch = "gemma3";
    s.n_layer = 6, s.n_embd = 64, s.n_head = 4, s.n_kv_head = 1, s.head_dim = 32, s.n_ff = 192;
    s.tied_embeddings = true, s.rope_theta = 1e6f, s.sliding_window = 32;
    return s;
  }
  if (preset == "gemma-3-1b") {  // Gemma 3 1B (google/gemma-3-1b-it)
    s.arch = "gemma3";
    s.n_layer = 26, s.n_embd = 1152, s.n_head = 4, s.n_kv_head = 1, s.head_dim = 256;
    s.n_ff = 6912, s.n_vocab = 262144, s.n_ctx = 32768, s.tied_embeddings = true;
    s.rope_theta = 1e6f, s.sliding_window = 512;
    return s;
  }
  if (MoePreset(preset, s)) return s;
  std::string names;
  for (const auto& n : SyntheticPresetNames()) names += (names.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown model preset '" + std::string(preset) + "' (known: " + names + ")");
}

DType Q4KMTensorType(const SyntheticSpec& spec, std::string_view name, int64_t layer,
                     int64_t n_cols) {
  const int64_t n = spec.n_layer;
  // llama.cpp's use_more_bits(i, n).
  const bool more_bits =
      layer >= 0 && (layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2);
  const bool is_head = name == "output.weight" || (name == "token_embd.weight" && spec.tied_embeddings);
  // llama.cpp counts attn_qkv as an attn_v ("attention-v-like" tensors), and
  // every ffn_down* (the experts' and the shared expert's) as an ffn_down.
  const bool v_like = name.ends_with("attn_v.weight") || name.ends_with("attn_qkv.weight");
  const bool down = name.find("ffn_down") != std::string_view::npos;
  // With 8 experts attn_v and attn_k go to Q8_0 ("trades just ~128MB").
  const bool moe8 = SyntheticMoe(spec) && spec.n_expert == 8;
  if (moe8 && (v_like || name.ends_with("attn_k.weight"))) return DType::kQ8_0;
  const bool wants_q6 = is_head || (more_bits && (v_like || down));
  if (n_cols % 256 != 0) return wants_q6 ? DType::kQ8_0 : DType::kQ5_0;
  return wants_q6 ? DType::kQ6_K : DType::kQ4_K;
}

namespace {

using synthetic::DimsOf;
using synthetic::IsQwen35Attention;
using synthetic::Qwen35Dims;

Status CheckQwen35(const SyntheticSpec& s, int64_t head_dim) {
  auto fail = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("qwen35 " + field + ": " + why);
  };
  const struct {
    const char* field;
    int64_t v;
  } kSizes[] = {{"full-attention-interval", s.full_attention_interval},
                {"linear-key-heads", s.linear_key_heads},
                {"linear-value-heads", s.linear_value_heads},
                {"linear-head-dim", s.linear_head_dim}};
  for (const auto& [field, v] : kSizes) {
    if (v <= 0 || v > 65536) return fail(field, std::to_string(v) + ", expected 1..65536");
  }
  if (s.linear_value_heads % s.linear_key_heads != 0) {
    return fail("linear-value-heads", std::to_string(s.linear_value_heads) +
                                          " must be a multiple of linear-key-heads (" +
                                          std::to_string(s.linear_key_heads) + ")");
  }
  const int64_t value_dim = s.linear_value_heads * s.linear_head_dim;
  if (s.linear_inner != 0 && s.linear_inner != value_dim) {
    return fail("linear-inner", std::to_string(s.linear_inner) +
                                    ", expected linear-value-heads x linear-head-dim = " +
                                    std::to_string(value_dim));
  }
  if (s.ssm_conv < 2 || s.ssm_conv > 64) {
    return fail("ssm-conv", std::to_string(s.ssm_conv) + " taps, expected 2..64");
  }
  const Qwen35Dims d = DimsOf(s, head_dim);
  if (d.n_rot <= 0 || d.n_rot > head_dim || d.n_rot % 2 != 0) {
    return fail("rope-dims", std::to_string(d.n_rot) +
                                 ", expected an even number in 2..head dim (" +
                                 std::to_string(head_dim) + ")");
  }
  int64_t sum = 0;
  for (int32_t v : d.sections) {
    if (v < 0) return fail("rope-sections", "negative section " + std::to_string(v));
    sum += v;
  }
  if (sum != d.n_rot / 2) {
    return fail("rope-sections", "they sum to " + std::to_string(sum) +
                                     ", expected rope-dims / 2 = " + std::to_string(d.n_rot / 2));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSyntheticSpec(const SyntheticSpec& s) {
  auto positive = [](const char* field, int64_t v, int64_t max) -> Status {
    if (v <= 0 || v > max) {
      return Status::InvalidArgument(std::string(field) + " = " + std::to_string(v) +
                                     ", expected 1.." + std::to_string(max));
    }
    return Status::Ok();
  };
  const std::string_view trunk = SyntheticTrunk(s);
  if (trunk != "llama" && trunk != "qwen2" && trunk != "qwen3" && trunk != "nemotron_h" &&
      trunk != "qwen35" && trunk != "smollm3" && trunk != "granite" && trunk != "phi3" &&
      trunk != "gemma3" && trunk != "gpt-oss") {
    return Status::InvalidArgument("arch '" + s.arch +
                                   "' cannot be synthesised (llama, qwen2, qwen3, nemotron_h, "
                                   "qwen35, smollm3, granite, phi3, gemma3, qwen3moe, qwen35moe, "
                                   "nemotron_h_moe, gpt-oss)");
  }
  if (SyntheticMoe(s)) {
    MX_RETURN_IF_ERROR(positive("experts", s.n_expert, 512));
    MX_RETURN_IF_ERROR(positive("experts-used", s.n_expert_used, s.n_expert));
    MX_RETURN_IF_ERROR(positive("expert-ffn", s.n_ff_expert, 1 << 20));
    if (s.arch == "qwen35moe" || s.arch == "nemotron_h_moe") {
      MX_RETURN_IF_ERROR(positive("shared-expert-ffn", s.n_ff_shared, 1 << 20));
    }
    if (s.expert_groups > 1 &&
        (s.n_expert % s.expert_groups != 0 || s.n_expert / s.expert_groups < 2 ||
         s.expert_groups_used <= 0 || s.expert_groups_used >= s.expert_groups)) {
      return Status::InvalidArgument("expert groups " + std::to_string(s.expert_groups) + " / " +
                                     std::to_string(s.expert_groups_used) +
                                     ": expected groups of 2 or more experts and 1..groups-1 used");
    }
    if (s.arch == "gpt-oss" && s.sliding_window <= 0) {
      return Status::InvalidArgument("gpt-oss needs a sliding window (attention.sliding_window)");
    }
  }
  if (s.sliding_window < 0 || s.sliding_window > (1 << 24) || s.sliding_window_pattern < 0 ||
      s.sliding_window_pattern > 4096) {
    return Status::InvalidArgument("sliding window " + std::to_string(s.sliding_window) +
                                   " / pattern " + std::to_string(s.sliding_window_pattern) +
                                   ", expected 0.." + std::to_string(1 << 24) + " / 0..4096");
  }
  if (s.arch != "gemma3" && s.sliding_window_pattern != 0) {
    return Status::InvalidArgument("sliding-window-pattern is only written for gemma3");
  }
  if (s.arch == "gemma3" && !(s.rope_theta_swa > 1)) {
    return Status::InvalidArgument("gemma3 local RoPE base " + std::to_string(s.rope_theta_swa) +
                                   ", expected a number above 1");
  }
  if (s.llama3_rope_factor != 0) {
    if (s.arch != "llama") {
      return Status::InvalidArgument("Llama 3 frequency factors are only written for llama, not " +
                                     s.arch);
    }
    if (!(s.llama3_rope_factor >= 1 && s.llama3_low_freq_factor > 0 &&
          s.llama3_high_freq_factor > s.llama3_low_freq_factor)) {
      return Status::InvalidArgument(
          "Llama 3 frequency factors: expected factor >= 1 and 0 < low < high freq factor");
    }
  }
  if ((s.arch == "phi3" || s.llama3_rope_factor != 0) && (s.rope_orig_ctx <= 0 || s.rope_orig_ctx > (1 << 24))) {
    return Status::InvalidArgument("rope original context " + std::to_string(s.rope_orig_ctx) +
                                   ", expected 1.." + std::to_string(1 << 24));
  }
  if (s.arch == "phi3" && s.head_dim != 0 && s.head_dim * s.n_head != s.n_embd) {
    return Status::InvalidArgument("phi3 heads are dim / heads wide (" + std::to_string(s.n_embd) +
                                   " / " + std::to_string(s.n_head) + "); head-dim " +
                                   std::to_string(s.head_dim) + " cannot be written");
  }
  if (trunk == "nemotron_h") {
    if (s.layer_pattern.empty() || s.layer_pattern.find_first_not_of("M*-") != std::string::npos) {
      return Status::InvalidArgument("layer pattern '" + s.layer_pattern +
                                     "': expected letters M (Mamba2), * (attention), - (MLP)");
    }
    const int64_t d_inner = SyntheticMambaInner(s);
    if (s.ssm_head_dim <= 0 || d_inner % s.ssm_head_dim != 0 || s.ssm_groups <= 0 ||
        (d_inner / s.ssm_head_dim) % s.ssm_groups != 0 || s.ssm_state <= 0 || s.ssm_conv < 2) {
      return Status::InvalidArgument("Mamba2 shape: d_inner " + std::to_string(d_inner) + " must split into heads of " +
                                     std::to_string(s.ssm_head_dim) + " that divide into " +
                                     std::to_string(s.ssm_groups) + " groups");
    }
  }
  if (trunk != "qwen35" && s.arch != "phi3" && s.rope_dims != 0) {
    return Status::InvalidArgument("rope-dims is only written for qwen35 and phi3 (" + s.arch +
                                   " rotates whole heads)");
  }
  if (trunk != "qwen35" && s.rope_sections != std::array<int32_t, 4>{}) {
    return Status::InvalidArgument("rope-dims / rope-sections (IMRoPE) are only written for qwen35");
  }
  MX_RETURN_IF_ERROR(positive("layers", s.n_layer, 512));
  MX_RETURN_IF_ERROR(positive("dim", s.n_embd, 65536));
  MX_RETURN_IF_ERROR(positive("heads", s.n_head, 1024));
  MX_RETURN_IF_ERROR(positive("kv-heads", s.n_kv_head, 1024));
  MX_RETURN_IF_ERROR(positive("ffn", s.n_ff, 1 << 20));
  MX_RETURN_IF_ERROR(positive("context", s.n_ctx, 1 << 22));
  if (s.n_vocab < 259 + 3 || s.n_vocab > (1 << 22)) {
    return Status::InvalidArgument("vocab = " + std::to_string(s.n_vocab) + ", expected 262.." +
                                   std::to_string(1 << 22));
  }
  if (s.n_head % s.n_kv_head != 0) {
    return Status::InvalidArgument("heads (" + std::to_string(s.n_head) +
                                   ") must be a multiple of kv-heads (" +
                                   std::to_string(s.n_kv_head) + ")");
  }
  int64_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0) {
    return Status::InvalidArgument("dim (" + std::to_string(s.n_embd) +
                                   ") must be a multiple of heads, or set head-dim");
  }
  if (hd % 2 != 0) return Status::InvalidArgument("head dim " + std::to_string(hd) + " must be even");
  if (s.arch == "phi3" && (s.rope_dims < 0 || s.rope_dims > hd || s.rope_dims % 2 != 0)) {
    return Status::InvalidArgument("phi3 rope-dims " + std::to_string(s.rope_dims) +
                                   ", expected an even number in 2..head dim (" +
                                   std::to_string(hd) + ")");
  }
  std::vector<int64_t> row_lengths = {s.n_embd, s.n_head * hd, s.n_ff};
  if (SyntheticMoe(s)) {
    row_lengths.push_back(s.n_ff_expert);
    if (s.arch == "qwen35moe" || s.arch == "nemotron_h_moe") row_lengths.push_back(s.n_ff_shared);
  }
  if (trunk == "nemotron_h") row_lengths.push_back(SyntheticMambaInner(s));
  if (trunk == "qwen35") {
    MX_RETURN_IF_ERROR(CheckQwen35(s, hd));
    row_lengths.push_back(DimsOf(s, hd).value_dim);  // ssm_out
  }
  if (s.q4_k_m) return Status::Ok();  // every row length has a fallback type
  if (!kernels::QuantizeSupported(s.weight_type)) {
    return Status::InvalidArgument(
        "weight type " + DTypeName(s.weight_type) + " cannot be written" +
        (kernels::WeightTypeSupported(s.weight_type)
             ? " (the engine loads it but has no quantizer for it; docs/weight_types.md)"
             : ""));
  }
  const int64_t block = GetDTypeInfo(s.weight_type).block_values;
  for (int64_t cols : row_lengths) {
    if (cols % block != 0) {
      return Status::InvalidArgument("weight type " + DTypeName(s.weight_type) + " needs rows that are a multiple of " +
                                     std::to_string(block) + " values; a row here has " +
                                     std::to_string(cols) + " (q4_k_m falls back per tensor)");
    }
  }
  return Status::Ok();
}

}  // namespace mx::models
