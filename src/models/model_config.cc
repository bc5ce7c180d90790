#include "models/model_config.h"

#include <string>

#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {
namespace config_keys {

Result<int64_t> Int(const gguf::GgufFile& f, const std::string& arch, const std::string& suffix,
                    int64_t fallback) {
  std::string key = arch + "." + suffix;
  if (f.Find(key) == nullptr) {
    if (fallback >= 0) return fallback;
    return Status::InvalidArgument("missing required metadata key '" + key + "'");
  }
  return f.GetInt(key);
}

Result<double> Float(const gguf::GgufFile& f, const std::string& arch, const std::string& suffix,
                     double fallback) {
  std::string key = arch + "." + suffix;
  if (f.Find(key) == nullptr) return fallback;
  return f.GetFloat(key);
}

Status Positive(const std::string& what, int64_t v, int64_t max) {
  if (v <= 0 || v > max) {
    return Status::InvalidArgument(what + " = " + std::to_string(v) + ", expected 1.." +
                                   std::to_string(max));
  }
  return Status::Ok();
}

Status ReadSsmSizes(const gguf::GgufFile& f, const std::string& arch, ModelConfig& c) {
  MX_ASSIGN_OR_RETURN(c.ssm_d_conv, Int(f, arch, "ssm.conv_kernel", -1));
  MX_ASSIGN_OR_RETURN(c.ssm_d_inner, Int(f, arch, "ssm.inner_size", -1));
  MX_ASSIGN_OR_RETURN(c.ssm_d_state, Int(f, arch, "ssm.state_size", -1));
  MX_ASSIGN_OR_RETURN(c.ssm_n_head, Int(f, arch, "ssm.time_step_rank", -1));
  MX_ASSIGN_OR_RETURN(c.ssm_n_group, Int(f, arch, "ssm.group_count", -1));
  MX_RETURN_IF_ERROR(Positive(arch + ".ssm.conv_kernel", c.ssm_d_conv, 64));
  MX_RETURN_IF_ERROR(Positive(arch + ".ssm.inner_size", c.ssm_d_inner, kMaxDim));
  MX_RETURN_IF_ERROR(Positive(arch + ".ssm.state_size", c.ssm_d_state, 4096));
  MX_RETURN_IF_ERROR(Positive(arch + ".ssm.time_step_rank", c.ssm_n_head, 4096));
  MX_RETURN_IF_ERROR(Positive(arch + ".ssm.group_count", c.ssm_n_group, 4096));
  if (c.ssm_d_inner % c.ssm_n_head != 0 || c.ssm_n_head % c.ssm_n_group != 0 ||
      c.ssm_d_inner % c.ssm_n_group != 0) {
    return Status::InvalidArgument(arch + ": ssm.inner_size " + std::to_string(c.ssm_d_inner) +
                                   ", time_step_rank " + std::to_string(c.ssm_n_head) +
                                   " and group_count " + std::to_string(c.ssm_n_group) +
                                   " do not divide evenly");
  }
  return Status::Ok();
}

Status ReadMoeSizes(const gguf::GgufFile& f, const std::string& arch, bool shared,
                    ModelConfig& c) {
  MoeConfig& m = c.moe;
  const int64_t n_ff0 = c.layers.empty() ? 0 : c.layers[0].n_ff;
  MX_ASSIGN_OR_RETURN(m.n_expert, Int(f, arch, "expert_count", -1));
  MX_ASSIGN_OR_RETURN(m.n_expert_used, Int(f, arch, "expert_used_count", -1));
  MX_RETURN_IF_ERROR(Positive(arch + ".expert_count", m.n_expert, kMaxExperts));
  MX_RETURN_IF_ERROR(Positive(arch + ".expert_used_count", m.n_expert_used, m.n_expert));
  MX_ASSIGN_OR_RETURN(m.n_ff_expert,
                      Int(f, arch, "expert_feed_forward_length", n_ff0 / m.n_expert_used));
  MX_RETURN_IF_ERROR(Positive(arch + ".expert_feed_forward_length", m.n_ff_expert, kMaxDim));
  if (shared) {
    MX_ASSIGN_OR_RETURN(m.n_ff_shared, Int(f, arch, "expert_shared_feed_forward_length", n_ff0));
    MX_RETURN_IF_ERROR(
        Positive(arch + ".expert_shared_feed_forward_length", m.n_ff_shared, kMaxDim));
  }
  MX_ASSIGN_OR_RETURN(m.n_group, Int(f, arch, "expert_group_count", 0));
  MX_ASSIGN_OR_RETURN(m.n_group_used, Int(f, arch, "expert_group_used_count", 0));
  if (m.n_group > 1) {
    if (m.n_expert % m.n_group != 0 || m.n_expert / m.n_group < 2) {
      return Status::InvalidArgument(
          arch + ".expert_group_count = " + std::to_string(m.n_group) + ": the " +
          std::to_string(m.n_expert) + " experts must split into groups of 2 or more");
    }
    if (m.n_group_used <= 0 || m.n_group_used >= m.n_group) {
      return Status::InvalidArgument(arch + ".expert_group_used_count = " +
                                     std::to_string(m.n_group_used) + ", expected 1.." +
                                     std::to_string(m.n_group - 1));
    }
  }
  return Status::Ok();
}

}  // namespace config_keys

using config_keys::Float;
using config_keys::Int;
using config_keys::kMaxDim;
using config_keys::Positive;

const char* ArchName(Arch arch) {
  switch (arch) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
    case Arch::kNemotronH: return "nemotron_h";
    case Arch::kQwen35: return "qwen35";
    case Arch::kSmolLm3: return "smollm3";
    case Arch::kGranite: return "granite";
    case Arch::kPhi3: return "phi3";
    case Arch::kMistral3: return "mistral3";
    case Arch::kGemma3: return "gemma3";
    case Arch::kQwen3Moe: return "qwen3moe";
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kNemotronHMoe: return "nemotron_h_moe";
    case Arch::kGptOss: return "gpt-oss";
  }
  return "?";
}

const char* MixerName(Mixer mixer) {
  switch (mixer) {
    case Mixer::kNone: return "none";
    case Mixer::kAttention: return "attention";
    case Mixer::kGatedAttention: return "gated attention";
    case Mixer::kMamba2: return "Mamba2";
    case Mixer::kDeltaNet: return "Gated DeltaNet";
  }
  return "?";
}

const std::vector<float>& ModelConfig::RopeFactorsFor(int64_t n_ctx) const {
  if (!rope_freqs.empty()) return rope_freqs;
  return n_ctx > rope.n_ctx_orig ? rope_factors_long : rope_factors_short;
}

int64_t ModelConfig::n_attention_layers() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.has_attention() ? 1 : 0;
  return n;
}

int64_t ModelConfig::n_recurrent_layers() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.is_recurrent() ? 1 : 0;
  return n;
}

Result<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& f) {
  ModelConfig c;
  MX_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  const Architecture* family = FindArchitecture(arch);
  if (family == nullptr) {
    return Status::NotSupported("architecture '" + arch + "' is not supported (supported: " +
                                SupportedArchitectureNames() + ")");
  }
  c.arch = family->arch;
  MX_ASSIGN_OR_RETURN(c.n_embd, Int(f, arch, "embedding_length", -1));
  MX_ASSIGN_OR_RETURN(c.n_layer, Int(f, arch, "block_count", -1));
  MX_ASSIGN_OR_RETURN(c.n_ctx_train, Int(f, arch, "context_length", 4096));
  MX_RETURN_IF_ERROR(Positive(arch + ".embedding_length", c.n_embd, kMaxDim));
  MX_RETURN_IF_ERROR(Positive(arch + ".block_count", c.n_layer, 4096));
  MX_RETURN_IF_ERROR(Positive(arch + ".context_length", c.n_ctx_train, int64_t{1} << 24));

  size_t n_layer = static_cast<size_t>(c.n_layer);
  MX_ASSIGN_OR_RETURN(auto n_head,
                      f.GetIntArrayOrScalar(arch + ".attention.head_count", n_layer));
  std::vector<int64_t> n_kv_head = n_head;
  if (f.Find(arch + ".attention.head_count_kv") != nullptr) {
    MX_ASSIGN_OR_RETURN(n_kv_head,
                        f.GetIntArrayOrScalar(arch + ".attention.head_count_kv", n_layer));
  }
  // Absent in files whose layers are all experts (qwen35moe): 0, which the
  // families that need it reject below.
  std::vector<int64_t> n_ff(n_layer, 0);
  if (f.Find(arch + ".feed_forward_length") != nullptr) {
    MX_ASSIGN_OR_RETURN(n_ff, f.GetIntArrayOrScalar(arch + ".feed_forward_length", n_layer));
  }

  int64_t head0 = 0;
  for (int64_t h : n_head) head0 = head0 > 0 ? head0 : h;
  MX_RETURN_IF_ERROR(Positive(arch + ".attention.head_count", head0, 4096));
  MX_ASSIGN_OR_RETURN(c.head_dim_k, Int(f, arch, "attention.key_length", c.n_embd / head0));
  MX_ASSIGN_OR_RETURN(c.head_dim_v, Int(f, arch, "attention.value_length", c.head_dim_k));
  MX_RETURN_IF_ERROR(Positive(arch + ".attention.key_length", c.head_dim_k, 4096));
  MX_RETURN_IF_ERROR(Positive(arch + ".attention.value_length", c.head_dim_v, 4096));
  if (c.head_dim_k != c.head_dim_v) {
    return Status::NotSupported("key_length " + std::to_string(c.head_dim_k) +
                                " != value_length " + std::to_string(c.head_dim_v));
  }
  MX_ASSIGN_OR_RETURN(double eps, Float(f, arch, "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(eps > 0 && eps < 1)) {
    return Status::InvalidArgument(arch + ".attention.layer_norm_rms_epsilon = " +
                                   std::to_string(eps) + ", expected in (0, 1)");
  }
  c.rms_eps = static_cast<float>(eps);

  c.layers.resize(n_layer);
  for (size_t i = 0; i < n_layer; ++i) {
    LayerConfig& l = c.layers[i];
    l.n_head = static_cast<int>(n_head[i]);
    l.n_kv_head = static_cast<int>(n_kv_head[i]);
    l.n_ff = static_cast<int>(n_ff[i]);
    if (n_ff[i] < 0 || n_ff[i] > kMaxDim) {
      return Status::InvalidArgument(arch + " layer " + std::to_string(i) +
                                     ": feed_forward_length = " + std::to_string(n_ff[i]));
    }
  }

  // RoPE: base and scaling (the family sets mode and dims). Linear scaling
  // divides every frequency by the factor; YaRN (static, as llama.cpp runs
  // it) blends each pair between its own and the divided frequency by a ramp
  // over the correction dims of beta_fast = 32 and beta_slow = 1 and scales
  // cos and sin by 1 + 0.1 ln(factor); rope.scaling.attn_factor multiplies
  // cos and sin under every type. The yarn_* keys are not read (llama.cpp
  // reads them for none of these families). LongRoPE's tables are tensors.
  MX_ASSIGN_OR_RETURN(double base, Float(f, arch, "rope.freq_base", 10000.0));
  c.rope.freq_base = static_cast<float>(base);
  std::string scaling = "linear";
  if (f.Find(arch + ".rope.scaling.type") != nullptr) {
    MX_ASSIGN_OR_RETURN(scaling, f.GetString(arch + ".rope.scaling.type"));
  }
  MX_ASSIGN_OR_RETURN(double factor, Float(f, arch, "rope.scaling.factor", 0.0));
  if (scaling != "none" && scaling != "linear" && scaling != "yarn" && scaling != "longrope") {
    if (factor != 0.0 && factor != 1.0) {
      return Status::NotSupported(arch + ".rope.scaling.type '" + scaling + "' is not supported");
    }
  }
  if (!(factor >= 0.0 && factor < 1e6)) {
    return Status::InvalidArgument(arch + ".rope.scaling.factor = " + std::to_string(factor) +
                                   ", expected a positive number");
  }
  c.rope.freq_scale = (factor == 0.0 || scaling == "none") ? 1.0f : static_cast<float>(1.0 / factor);
  MX_ASSIGN_OR_RETURN(int64_t n_ctx_orig,
                      Int(f, arch, "rope.scaling.original_context_length", c.n_ctx_train));
  MX_RETURN_IF_ERROR(Positive(arch + ".rope.scaling.original_context_length", n_ctx_orig,
                              int64_t{1} << 24));
  c.rope.n_ctx_orig = static_cast<int>(n_ctx_orig);
  MX_ASSIGN_OR_RETURN(double attn_factor, Float(f, arch, "rope.scaling.attn_factor", 1.0));
  if (!(attn_factor > 0.0 && attn_factor < 1e3)) {
    return Status::InvalidArgument(arch + ".rope.scaling.attn_factor = " +
                                   std::to_string(attn_factor) + ", expected a positive number");
  }
  c.rope.attn_factor = static_cast<float>(attn_factor);
  if (scaling == "yarn" && c.rope.freq_scale != 1.0f) c.rope.ext_factor = 1.0f;
  MX_ASSIGN_OR_RETURN(int64_t n_rot, Int(f, arch, "rope.dimension_count", c.head_dim_k));
  c.rope.n_rot = static_cast<int>(n_rot);

  MX_RETURN_IF_ERROR(family->configure(f, c));

  // Every layer's heads, whatever the family decided.
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    std::string where = arch + " layer " + std::to_string(i) + ": ";
    if (l.has_attention() &&
        (l.n_head <= 0 || l.n_kv_head <= 0 || l.n_head % l.n_kv_head != 0 || l.n_head > 4096)) {
      return Status::InvalidArgument(where + "head_count " + std::to_string(l.n_head) +
                                     " must be a positive multiple of head_count_kv " +
                                     std::to_string(l.n_kv_head));
    }
    if (l.ffn != Ffn::kNone && l.ffn != Ffn::kMoe && l.n_ff <= 0) {
      return Status::InvalidArgument(where + "feed_forward_length = " + std::to_string(l.n_ff) +
                                     (l.n_ff == 0 ? " (missing or 0)" : ""));
    }
    if (l.ffn == Ffn::kMoe && c.moe.n_expert == 0) {
      return Status::InvalidArgument(where + "an expert layer without experts");
    }
  }
  if (c.use_rope && (c.rope.n_rot <= 0 || c.rope.n_rot > c.head_dim_k || c.rope.n_rot % 2 != 0)) {
    return Status::InvalidArgument(arch + ".rope.dimension_count = " +
                                   std::to_string(c.rope.n_rot) + ", expected an even number in 2.." +
                                   std::to_string(c.head_dim_k));
  }

  // Vocabulary size: the token list (the tokenizer validates it further).
  if (const gguf::Value* tokens = f.Find("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int64_t>(tokens->array_size());
  }
  if (f.Find(arch + ".vocab_size") != nullptr) {
    MX_ASSIGN_OR_RETURN(c.n_vocab, f.GetInt(arch + ".vocab_size"));
  }
  MX_RETURN_IF_ERROR(Positive("vocabulary size", c.n_vocab, int64_t{1} << 22));
  return c;
}

}  // namespace mx::models
