#include "models/model_config.h"

#include <string>

namespace mx::models {
namespace {

// Reads "{arch}.{suffix}" as an integer, or `fallback` when absent (fallback < 0 = required).
Result<int64_t> ArchInt(const gguf::GgufFile& f, const std::string& arch, const std::string& suffix,
                        int64_t fallback) {
  std::string key = arch + "." + suffix;
  if (f.Find(key) == nullptr) {
    if (fallback >= 0) return fallback;
    return Status::InvalidArgument("missing required metadata key '" + key + "'");
  }
  return f.GetInt(key);
}

Result<double> ArchFloat(const gguf::GgufFile& f, const std::string& arch, const std::string& suffix,
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

}  // namespace

const char* ArchName(Arch arch) {
  switch (arch) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
    case Arch::kNemotronH: return "nemotron_h";
  }
  return "?";
}

int64_t ModelConfig::n_attention_layers() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.has_attention() ? 1 : 0;
  return n;
}

int64_t ModelConfig::n_recurrent_layers() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.kind == LayerKind::kMamba2 ? 1 : 0;
  return n;
}

Result<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& f) {
  ModelConfig c;
  MX_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch == "llama") {
    c.arch = Arch::kLlama;
  } else if (arch == "qwen2") {
    c.arch = Arch::kQwen2;
  } else if (arch == "qwen3") {
    c.arch = Arch::kQwen3;
  } else if (arch == "nemotron_h") {
    c.arch = Arch::kNemotronH;
  } else {
    return Status::NotSupported("architecture '" + arch +
                                "' is not supported (supported: llama, qwen2, qwen3, nemotron_h)");
  }
  constexpr int64_t kMaxDim = 1 << 20;
  MX_ASSIGN_OR_RETURN(c.n_embd, ArchInt(f, arch, "embedding_length", -1));
  MX_ASSIGN_OR_RETURN(c.n_layer, ArchInt(f, arch, "block_count", -1));
  MX_ASSIGN_OR_RETURN(c.n_ctx_train, ArchInt(f, arch, "context_length", 4096));
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
  MX_ASSIGN_OR_RETURN(auto n_ff, f.GetIntArrayOrScalar(arch + ".feed_forward_length", n_layer));

  int64_t head0 = n_head.empty() ? 0 : n_head[0];
  MX_RETURN_IF_ERROR(Positive(arch + ".attention.head_count", head0, 4096));
  MX_ASSIGN_OR_RETURN(c.head_dim_k, ArchInt(f, arch, "attention.key_length", c.n_embd / head0));
  MX_ASSIGN_OR_RETURN(c.head_dim_v, ArchInt(f, arch, "attention.value_length", c.head_dim_k));
  MX_RETURN_IF_ERROR(Positive(arch + ".attention.key_length", c.head_dim_k, 4096));
  MX_RETURN_IF_ERROR(Positive(arch + ".attention.value_length", c.head_dim_v, 4096));
  if (c.head_dim_k != c.head_dim_v) {
    return Status::NotSupported("key_length " + std::to_string(c.head_dim_k) +
                                " != value_length " + std::to_string(c.head_dim_v));
  }
  MX_ASSIGN_OR_RETURN(double eps, ArchFloat(f, arch, "attention.layer_norm_rms_epsilon", 1e-5));
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
    std::string where = arch + " layer " + std::to_string(i) + ": ";
    if (c.arch == Arch::kNemotronH) {
      if (n_kv_head[i] == 0 && n_ff[i] == 0) {
        l.kind = LayerKind::kMamba2;
      } else if (n_ff[i] > 0) {
        l.kind = LayerKind::kMlp;
      } else {
        l.kind = LayerKind::kAttention;
      }
    } else {
      l.kind = LayerKind::kAttentionFfn;
      if (n_ff[i] <= 0 || n_ff[i] > kMaxDim) {
        return Status::InvalidArgument(where + "feed_forward_length = " + std::to_string(n_ff[i]));
      }
    }
    if (l.has_attention()) {
      if (n_head[i] <= 0 || n_kv_head[i] <= 0 || n_head[i] % n_kv_head[i] != 0 || n_head[i] > 4096) {
        return Status::InvalidArgument(where + "head_count " + std::to_string(n_head[i]) +
                                       " must be a positive multiple of head_count_kv " +
                                       std::to_string(n_kv_head[i]));
      }
    }
  }

  // RoPE.
  c.use_rope = c.arch != Arch::kNemotronH;
  c.rope.mode = c.arch == Arch::kLlama ? kernels::RopeMode::kNormal : kernels::RopeMode::kNeox;
  MX_ASSIGN_OR_RETURN(int64_t n_rot, ArchInt(f, arch, "rope.dimension_count", c.head_dim_k));
  if (c.use_rope && (n_rot <= 0 || n_rot > c.head_dim_k || n_rot % 2 != 0)) {
    return Status::InvalidArgument(arch + ".rope.dimension_count = " + std::to_string(n_rot) +
                                   ", expected an even number in 2.." +
                                   std::to_string(c.head_dim_k));
  }
  c.rope.n_rot = static_cast<int>(n_rot);
  MX_ASSIGN_OR_RETURN(double base, ArchFloat(f, arch, "rope.freq_base", 10000.0));
  c.rope.freq_base = static_cast<float>(base);
  std::string scaling = "linear";
  if (f.Find(arch + ".rope.scaling.type") != nullptr) {
    MX_ASSIGN_OR_RETURN(scaling, f.GetString(arch + ".rope.scaling.type"));
  }
  MX_ASSIGN_OR_RETURN(double factor, ArchFloat(f, arch, "rope.scaling.factor", 0.0));
  if (scaling != "none" && scaling != "linear") {
    if (factor != 0.0 && factor != 1.0) {
      return Status::NotSupported(arch + ".rope.scaling.type '" + scaling + "' is not supported");
    }
  }
  c.rope.freq_scale = (factor == 0.0 || scaling == "none") ? 1.0f : static_cast<float>(1.0 / factor);
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    return Status::NotSupported("rope_freqs.weight (Llama 3.1 frequency factors) is not supported yet");
  }

  c.qkv_bias = c.arch == Arch::kQwen2;
  c.qk_norm = c.arch == Arch::kQwen3;

  if (c.arch == Arch::kNemotronH) {
    MX_ASSIGN_OR_RETURN(c.ssm_d_conv, ArchInt(f, arch, "ssm.conv_kernel", -1));
    MX_ASSIGN_OR_RETURN(c.ssm_d_inner, ArchInt(f, arch, "ssm.inner_size", -1));
    MX_ASSIGN_OR_RETURN(c.ssm_d_state, ArchInt(f, arch, "ssm.state_size", -1));
    MX_ASSIGN_OR_RETURN(c.ssm_n_head, ArchInt(f, arch, "ssm.time_step_rank", -1));
    MX_ASSIGN_OR_RETURN(c.ssm_n_group, ArchInt(f, arch, "ssm.group_count", -1));
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
