// matricxon make-model: writes a synthetic GGUF model (models/synthetic_model.h)
// and, when asked, its vision projector (models/synthetic_projector.h).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/progress.h"
#include "core/env.h"
#include "models/synthetic_model.h"
#include "models/synthetic_projector.h"

namespace mx::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"out", "", "path of the .gguf file to write (required)"},
    {"preset", "tiny",
     "starting shape: tiny, tiny-hybrid, tiny-qwen35, smollm2-135m, "
     "qwen3-0.6b, qwen3.5-0.8b, "
     "llama-135m, llama-3.2-1b (Llama 3.1 frequency factors), phi-4-mini "
     "(LongRoPE), tiny-gemma3, "
     "gemma-3-1b (sliding window); mixtures of experts: tiny-qwen3moe, qwen3-30b-a3b, "
     "qwen3.5-35b-a3b, nemotron-3-nano, gpt-oss-20b (the real shapes) and qwen3-moe-bench, "
     "qwen3.5-moe-bench, nemotron-3-moe-bench, gpt-oss-bench (their layers, experts and top-k, "
     "narrower)"},
    {"arch", "",
     "architecture: llama, qwen2, qwen3, nemotron_h, qwen35, smollm3, granite, "
     "phi3, gemma3, qwen3moe, qwen35moe, nemotron_h_moe, gpt-oss"},
    {"experts", "", "mixtures of experts: experts per layer (expert_count)"},
    {"experts-used", "", "experts each token runs (expert_used_count)"},
    {"expert-ffn", "", "each expert's width (expert_feed_forward_length)"},
    {"shared-expert-ffn", "", "qwen35moe, nemotron_h_moe: the shared expert's width"},
    {"expert-groups", "",
     "nemotron_h_moe: groups of experts (expert_group_count; 0 or 1: none)"},
    {"expert-groups-used", "", "nemotron_h_moe: groups that compete per token"},
    {"mamba-inner", "", "nemotron_h(_moe): Mamba2 inner size (default 2 x dim)"},
    {"layer-pattern", "",
     "nemotron_h layer kinds, repeated: M Mamba2, * attention, - MLP (default "
     "M-M*-M*-)"},
    {"layers", "", "number of layers"},
    {"dim", "", "embedding width"},
    {"heads", "", "attention heads"},
    {"kv-heads", "", "key/value heads (GQA)"},
    {"head-dim", "", "head width (default dim / heads)"},
    {"ffn", "", "feed-forward width"},
    {"vocab", "", "vocabulary size (>= 262)"},
    {"context", "", "training context length"},
    {"full-attention-interval", "",
     "qwen35: every n-th layer is full attention, the others Gated DeltaNet "
     "(default 4)"},
    {"linear-key-heads", "", "qwen35 DeltaNet q/k heads (ssm.group_count)"},
    {"linear-value-heads", "",
     "qwen35 DeltaNet v heads (ssm.time_step_rank), a multiple of the key "
     "heads"},
    {"linear-head-dim", "", "qwen35 DeltaNet head width (ssm.state_size)"},
    {"linear-inner", "",
     "qwen35 ssm.inner_size (default and only valid value: value heads x head "
     "dim)"},
    {"ssm-conv", "", "conv taps of Mamba2 / DeltaNet layers (ssm.conv_kernel, default 4)"},
    {"rope-dims", "",
     "qwen35, phi3: rotated dims per attention head (rope.dimension_count, "
     "default the head)"},
    {"rope-sections", "",
     "qwen35 IMRoPE sections t,h,w,extra summing to rope-dims / 2 (default: "
     "dealt evenly, e.g. "
     "11,11,10,0 for 64 dims)"},
    {"rope-theta", "", "RoPE base (default 1e4 llama, 1e7 qwen35, 1e6 others)"},
    {"sliding-window", "",
     "gemma3: positions a local layer attends to (attention.sliding_window); "
     "phi3: the key "
     "readers ignore"},
    {"sliding-window-pattern", "",
     "gemma3: layer i is local iff i % P < P - 1 "
     "(attention.sliding_window_pattern, default 6)"},
    {"rope-theta-swa", "",
     "gemma3: RoPE base of the local layers (rope.freq_base_swa, default 1e4)"},
    {"type", "f32",
     "weight type of the matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, "
     "q4_k, q5_k, q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0, q1_0, q2_0, mxfp4, or q4_k_m (llama.cpp's "
     "Q4_K_M mix); the IQ1/IQ2/IQ3 types and nvfp4 load but cannot be written"},
    {"tied", "", "tie the output head to the token embeddings", true},
    {"untied", "", "separate output head", true},
    {"seed", "1", "weight seed"},
    {"name", "", "general.name (default: the preset)"},
    {"chat-template", "", "file whose text becomes tokenizer.chat_template (default: ChatML)"},
    {"projector", "",
     "also write the preset's vision projector (mmproj GGUF, Qwen 3.5 vision "
     "tower) to this path; "
     "presets with one: tiny-qwen35, qwen3.5-0.8b"},
    {"with-projector", "",
     "also write the vision projector, beside the model as <out without "
     ".gguf>.mmproj.gguf (the "
     "name the server pairs with the model)",
     true},
    {"projector-type", "",
     "weight type of the projector's matrices: f32, f16 or q8_0 (default: the "
     "preset's, f32 for "
     "tiny-qwen35, f16 for qwen3.5-0.8b)"},
    {"quiet", "", "no progress output", true},
};

// Sets the weight type (or the Q4_K_M mix) of `spec` from a --type value.
Status ParseWeightType(const std::string& s, models::SyntheticSpec* spec) {
  std::string lower;
  for (char c : s) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "q4_k_m") {
    spec->q4_k_m = true;
    return Status::Ok();
  }
  static const struct {
    const char* name;
    DType type;
  } kTypes[] = {{"f32", DType::kF32},   {"f16", DType::kF16},   {"bf16", DType::kBF16},
                {"q8_0", DType::kQ8_0}, {"q4_0", DType::kQ4_0}, {"q4_1", DType::kQ4_1},
                {"q5_0", DType::kQ5_0}, {"q5_1", DType::kQ5_1}, {"q4_k", DType::kQ4_K},
                {"q5_k", DType::kQ5_K}, {"q6_k", DType::kQ6_K}, {"q2_k", DType::kQ2_K},
                {"q3_k", DType::kQ3_K}, {"iq4_nl", DType::kIQ4_NL}, {"iq4_xs", DType::kIQ4_XS},
                {"tq1_0", DType::kTQ1_0}, {"tq2_0", DType::kTQ2_0}, {"q1_0", DType::kQ1_0},
                {"q2_0", DType::kQ2_0}, {"mxfp4", DType::kMXFP4}};
  for (const auto& t : kTypes) {
    if (lower == t.name) {
      spec->weight_type = t.type;
      spec->q4_k_m = false;
      return Status::Ok();
    }
  }
  // Other type names (iq2_xxs, nvfp4, ...) reach the spec check, which says
  // why the type cannot be written.
  DType named;
  if (DTypeFromName(lower, &named)) {
    spec->weight_type = named;
    spec->q4_k_m = false;
    return Status::Ok();
  }
  return Status::InvalidArgument("--type '" + s +
                                 "': expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                                 "q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0, "
                                 "q1_0, q2_0, mxfp4 or q4_k_m");
}

// "11,11,10,0" -> {11, 11, 10, 0}: exactly four integers.
Result<std::array<int32_t, 4>> ParseRopeSections(const std::string& s) {
  std::array<int32_t, 4> out{};
  size_t n = 0, start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (n == out.size()) break;
    MX_ASSIGN_OR_RETURN(int64_t v,
                        ParseInt("--rope-sections", s.substr(start, comma - start), 0, 1 << 16));
    out[n++] = static_cast<int32_t>(v);
    start = comma + 1;
  }
  if (n != out.size() || start <= s.size()) {
    return Status::InvalidArgument("--rope-sections '" + s +
                                   "': expected four integers t,h,w,extra");
  }
  return out;
}

// The projector to write beside `lm` (--projector / --with-projector), or
// nullopt when none was asked for. Its projection is the LM's width and its
// name and seed follow the LM's.
Result<std::optional<models::SyntheticProjectorSpec>> ProjectorSpec(
    const Flags& f, const models::SyntheticSpec& lm) {
  if (!f.Has("projector") && !f.GetBool("with-projector")) {
    if (f.Has("projector-type")) {
      return Status::InvalidArgument("--projector-type needs --projector or --with-projector");
    }
    return std::optional<models::SyntheticProjectorSpec>();
  }
  if (models::SyntheticTrunk(lm) != "qwen35" || models::SyntheticMoe(lm)) {
    return Status::InvalidArgument("--projector: the projector is Qwen 3.5's vision tower; arch '" +
                                   lm.arch + "' has none");
  }
  MX_ASSIGN_OR_RETURN(models::SyntheticProjectorSpec p,
                      models::SyntheticProjectorPreset(f.Get("preset")));
  p.projection_dim = lm.n_embd;
  p.name = lm.name + "-mmproj";
  p.seed = lm.seed;
  if (f.Has("projector-type")) {
    const std::string t = f.Get("projector-type");
    if (t == "f32") {
      p.weight_type = DType::kF32;
    } else if (t == "f16") {
      p.weight_type = DType::kF16;
    } else if (t == "q8_0") {
      p.weight_type = DType::kQ8_0;
    } else {
      return Status::InvalidArgument("--projector-type '" + t + "': expected f32, f16 or q8_0");
    }
  }
  MX_RETURN_IF_ERROR(models::ValidateSyntheticProjectorSpec(p));
  return std::optional<models::SyntheticProjectorSpec>(std::move(p));
}

Status Run(const Flags& f) {
  if (f.Get("out").empty()) return Status::InvalidArgument("--out is required");
  MX_ASSIGN_OR_RETURN(models::SyntheticSpec spec, models::SyntheticPreset(f.Get("preset")));
  if (f.Has("arch")) spec.arch = f.Get("arch");
  if (f.Has("layer-pattern")) spec.layer_pattern = f.Get("layer-pattern");
  struct IntFlag {
    const char* name;
    int64_t* field;
  };
  for (IntFlag i :
       {IntFlag{"layers", &spec.n_layer}, IntFlag{"dim", &spec.n_embd},
        IntFlag{"heads", &spec.n_head}, IntFlag{"kv-heads", &spec.n_kv_head},
        IntFlag{"head-dim", &spec.head_dim}, IntFlag{"ffn", &spec.n_ff},
        IntFlag{"vocab", &spec.n_vocab}, IntFlag{"context", &spec.n_ctx},
        IntFlag{"full-attention-interval", &spec.full_attention_interval},
        IntFlag{"linear-key-heads", &spec.linear_key_heads},
        IntFlag{"linear-value-heads", &spec.linear_value_heads},
        IntFlag{"linear-head-dim", &spec.linear_head_dim},
        IntFlag{"linear-inner", &spec.linear_inner}, IntFlag{"ssm-conv", &spec.ssm_conv},
        IntFlag{"rope-dims", &spec.rope_dims}, IntFlag{"sliding-window", &spec.sliding_window},
        IntFlag{"sliding-window-pattern", &spec.sliding_window_pattern},
        IntFlag{"experts", &spec.n_expert}, IntFlag{"experts-used", &spec.n_expert_used},
        IntFlag{"expert-ffn", &spec.n_ff_expert}, IntFlag{"shared-expert-ffn", &spec.n_ff_shared},
        IntFlag{"expert-groups", &spec.expert_groups},
        IntFlag{"expert-groups-used", &spec.expert_groups_used},
        IntFlag{"mamba-inner", &spec.mamba_inner}}) {
    if (f.Has(i.name)) {
      MX_ASSIGN_OR_RETURN(*i.field, f.GetInt(i.name, 1, int64_t{1} << 24));
    }
  }
  if (f.Has("rope-sections")) {
    MX_ASSIGN_OR_RETURN(spec.rope_sections, ParseRopeSections(f.Get("rope-sections")));
  } else if (f.Has("rope-dims")) {
    spec.rope_sections = {};  // the preset's sections were for its own rope-dims
  }
  if (f.Has("rope-theta")) {
    MX_ASSIGN_OR_RETURN(double theta, f.GetDouble("rope-theta", 1, 1e12));
    spec.rope_theta = static_cast<float>(theta);
  }
  if (f.Has("rope-theta-swa")) {
    MX_ASSIGN_OR_RETURN(double theta, f.GetDouble("rope-theta-swa", 1, 1e12));
    spec.rope_theta_swa = static_cast<float>(theta);
  }
  MX_RETURN_IF_ERROR(ParseWeightType(f.Get("type"), &spec));
  if (f.GetBool("tied")) spec.tied_embeddings = true;
  if (f.GetBool("untied")) spec.tied_embeddings = false;
  MX_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0, INT64_MAX));
  spec.seed = static_cast<uint64_t>(seed);
  if (f.Has("name")) spec.name = f.Get("name");
  if (f.Has("chat-template")) {
    auto text = Env::Default()->ReadFile(f.Get("chat-template"));
    if (!text.ok()) return text.status().WithContext("--chat-template");
    if (text->empty()) return Status::InvalidArgument("--chat-template " + f.Get("chat-template") + " is empty");
    spec.chat_template = std::move(text).value();
  }

  // Both specs are checked before either file is written.
  MX_RETURN_IF_ERROR(models::ValidateSyntheticSpec(spec));
  MX_ASSIGN_OR_RETURN(std::optional<models::SyntheticProjectorSpec> projector,
                      ProjectorSpec(f, spec));
  const std::string projector_path =
      f.Has("projector") ? f.Get("projector") : models::DefaultProjectorPath(f.Get("out"));
  if (projector && projector_path == f.Get("out")) {
    return Status::InvalidArgument("--projector " + projector_path + " is the model's own path");
  }

  Progress progress("writing " + f.Get("out"), !f.GetBool("quiet"));
  MX_RETURN_IF_ERROR(models::WriteSyntheticModel(
      Env::Default(), spec, f.Get("out"),
      [&](uint64_t done, uint64_t total) { progress.Update(done, total); }));
  progress.Done();
  if (projector) {
    Progress p_progress("writing " + projector_path, !f.GetBool("quiet"));
    MX_RETURN_IF_ERROR(models::WriteSyntheticProjector(
        Env::Default(), *projector, projector_path,
        [&](uint64_t done, uint64_t total) { p_progress.Update(done, total); }));
    p_progress.Done();
  }
  return Status::Ok();
}

}  // namespace

int MakeModelCommand(int argc, char** argv) {
  return RunCommand("make-model",
                    "Writes a synthetic GGUF model with deterministic weights, a byte-level BPE "
                    "tokenizer and a ChatML template; with --projector or --with-projector also "
                    "the vision projector (mmproj GGUF) of a Qwen 3.5 preset.",
                    kFlags, argc, argv, 2, Run);
}

}  // namespace mx::cli
