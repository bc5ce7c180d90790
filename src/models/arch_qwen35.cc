// qwen35 (Qwen 3.5): Gated DeltaNet layers and gated full-attention layers,
// each followed by a SwiGLU FFN (ref/README "qwen35").
//
//   x = E[tok]
//   per layer:  x += mixer(rms(x, attn_norm));  u = rms(x, post_attention_norm)
//               x += Wdown(silu(Wgate u) * Wup u)
//   logits = E rms(x, output_norm)               (output.weight when present)
//
// Layer i is full attention iff (i + 1) % full_attention_interval == 0, or,
// when the file has attention.recurrent_layers, iff that entry is 0. The last
// nextn_predict_layers blocks are draft blocks for multi-token prediction,
// skipped by the forward pass.
//
// Gated attention, h = the normed input:
//   [q | gate] = Wq h, per head [q (head_dim) | gate (head_dim)]
//   q = rms(q, q_norm), k = rms(Wk h, k_norm) per head, v = Wv h
//   q, k = rope(q), rope(k): the first n_rot dims only, NeoX pairs (j, j + n_rot/2)
//     (IMRoPE with every position component = the token position)
//   o = softmax(q.k / sqrt(head_dim)) v  (GQA)
//   out = Wo (o * sigmoid(gate))
//
// Gated DeltaNet (nk = group_count key heads, nv = time_step_rank value
// heads, dk = state_size, dv = inner_size / nv), h = the normed input:
//   mix = Wqkv h  (q nk x dk | k nk x dk | v nv x dv),  z = Wgate h
//   beta = sigmoid(Wbeta h),  g = ssm_a * softplus(Walpha h + dt_bias)    (per value head)
//   c = silu(causal depthwise conv(mix)), no bias; split in q, k, v
//   q = l2n(q) / sqrt(dk), k = l2n(k) per key head
//   value head i reads key head i mod nk (tiled) and keeps S_i [dk][dv]:
//     S_i = exp(g_i) S_i;  delta = beta_i (v_i - S_i^T k);  S_i += k delta^T;  o_i = S_i^T q
//   y_i = rms(o_i, ssm_norm) * silu(z_i);  out = Wout y
#include "models/architecture.h"
#include "models/config_keys.h"

namespace mx::models {

using config_keys::Int;

Status ConfigureQwen35Layers(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string arch = ArchName(c.arch);
  MX_ASSIGN_OR_RETURN(c.n_nextn_layers, Int(f, arch, "nextn_predict_layers", 0));
  if (c.n_nextn_layers < 0 || c.n_nextn_layers >= c.n_layer) {
    return Status::InvalidArgument(arch +
                                   ".nextn_predict_layers = " + std::to_string(c.n_nextn_layers) +
                                   ", expected 0.." + std::to_string(c.n_layer - 1));
  }
  const size_t n_blocks = static_cast<size_t>(c.n_layer);
  std::vector<bool> recurrent(n_blocks);
  const std::string pattern_key = arch + ".attention.recurrent_layers";
  if (const gguf::Value* v = f.Find(pattern_key)) {
    if (v->type != gguf::ValueType::kArray || v->ints.size() != n_blocks) {
      return Status::InvalidArgument(pattern_key + ": expected an array of " +
                                     std::to_string(n_blocks) + " integers or bools");
    }
    for (size_t i = 0; i < n_blocks; ++i) recurrent[i] = v->ints[i] != 0;
  } else {
    MX_ASSIGN_OR_RETURN(int64_t interval, Int(f, arch, "full_attention_interval", 4));
    MX_RETURN_IF_ERROR(config_keys::Positive(arch + ".full_attention_interval", interval, 4096));
    for (size_t i = 0; i < n_blocks; ++i) recurrent[i] = (i + 1) % interval != 0;
  }
  c.n_layer -= c.n_nextn_layers;
  c.layers.resize(static_cast<size_t>(c.n_layer));
  for (size_t i = 0; i < c.layers.size(); ++i) {
    c.layers[i].mixer = recurrent[i] ? Mixer::kDeltaNet : Mixer::kGatedAttention;
    c.layers[i].ffn = Ffn::kSwiGlu;
  }
  c.use_rope = true;
  c.rope.mode = kernels::RopeMode::kNeox;
  c.qk_norm = true;
  const std::string sections_key = arch + ".rope.dimension_sections";
  if (f.Find(sections_key) != nullptr) {
    MX_ASSIGN_OR_RETURN(std::vector<int64_t> sections, f.GetIntArray(sections_key));
    if (sections.size() != 4) {
      return Status::InvalidArgument(sections_key + " has " + std::to_string(sections.size()) +
                                     " entries, expected 4");
    }
    for (int64_t s : sections) c.rope_sections.push_back(static_cast<int>(s));
  }
  return config_keys::ReadSsmSizes(f, arch, c);
}

Status BindQwen35Layer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  if (c.layers[static_cast<size_t>(i)].mixer == Mixer::kDeltaNet) {
    MX_RETURN_IF_ERROR(BindDeltaNet(b, c, i, w));
  } else {
    MX_RETURN_IF_ERROR(BindAttention(b, c, i, w));
  }
  return BindFfn(b, c, i, "post_attention_norm.weight", w);
}

const Architecture kQwen35Architecture = {Arch::kQwen35, "qwen35", ConfigureQwen35Layers,
                                          BindQwen35Layer,
    "Qwen 3.5 dense models (Gated DeltaNet + gated attention), with their vision projector",
    "tiny-qwen35, tiny-qwen35-vision"};

}  // namespace mx::models
