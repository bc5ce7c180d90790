#include "models/synthetic_model.h"
#include "models/synthetic_qwen35.h"
#include "models/synthetic_random.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kernels/kernels.h"

namespace mx::models {

const char kChatmlTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

using synthetic::HashName;
using synthetic::Rng;
using synthetic::DimsOf;
using synthetic::IsQwen35Attention;
using synthetic::Qwen35Dims;

std::string Blk(int64_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

// general.file_type: llama.cpp's llama_ftype numbering (informational; tools
// print it as the model's quantization), not the ggml tensor type.
uint32_t FileType(const SyntheticSpec& s) {
  if (s.q4_k_m) return 15;  // MOSTLY_Q4_K_M
  switch (s.weight_type) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ4_1:
      return 3;
    case DType::kQ8_0:
      return 7;
    case DType::kQ5_0:
      return 8;
    case DType::kQ5_1:
      return 9;
    case DType::kQ4_K:
      return 14;  // MOSTLY_Q4_K_S: every matrix Q4_K
    case DType::kQ5_K:
      return 16;  // MOSTLY_Q5_K_S
    case DType::kQ6_K:
      return 18;
    case DType::kBF16:
      return 32;
    case DType::kQ2_K:
      return 10;  // MOSTLY_Q2_K
    case DType::kQ3_K:
      return 11;  // MOSTLY_Q3_K_S: every matrix Q3_K
    case DType::kIQ4_NL:
      return 25;
    case DType::kIQ4_XS:
      return 30;
    case DType::kTQ1_0:
      return 36;
    case DType::kTQ2_0:
      return 37;
    case DType::kMXFP4:
      return 38;  // MOSTLY_MXFP4_MOE
    case DType::kQ1_0:
      return 40;
    case DType::kQ2_0:
      return 41;
    default:
      return 0;
  }
}

}  // namespace



namespace {

// How a tensor's values are drawn (each from its own stream, see the header).
enum class Init {
  kNormal,      // std * N(0, 1)
  kNormWeight,  // 1 + 0.1 N(0, 1)
  kNegUniform,  // -U[lo, hi] (Mamba2 and DeltaNet A)
  kDtBias,      // softplus^-1(dt0), dt0 log-uniform in [lo, hi]
  kValues,      // the given values (RoPE frequency tables)
};

// One tensor to write.
struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: [ne0 = in (row length), ne1 = out]
  Init init = Init::kNormal;
  float std = 0;          // kNormal
  double lo = 0, hi = 0;  // kNegUniform, kDtBias
  bool matrix = false;    // stored in the weight type (else F32)
  int64_t layer = -1;     // block index, for the Q4_K_M rules
  std::vector<float> values;  // kValues
};

TensorPlan Plan(std::string name, std::vector<int64_t> shape) {
  TensorPlan p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  return p;
}
// A weight matrix [in, out] with std 1/sqrt(in), stored in the weight type.
TensorPlan Matrix(std::string name, int64_t in, int64_t out, int64_t layer = -1) {
  TensorPlan p = Plan(std::move(name), {in, out});
  p.std = 1 / std::sqrt(float(in));
  p.matrix = true;
  p.layer = layer;
  return p;
}
// A norm weight of `shape`, 1 + 0.1 N(0, 1), F32.
TensorPlan Norm(std::string name, std::vector<int64_t> shape) {
  TensorPlan p = Plan(std::move(name), std::move(shape));
  p.init = Init::kNormWeight;
  return p;
}
// An F32 tensor with values std * N(0, 1).
TensorPlan Normal(std::string name, std::vector<int64_t> shape, float std) {
  TensorPlan p = Plan(std::move(name), std::move(shape));
  p.std = std;
  return p;
}
TensorPlan Ranged(std::string name, std::vector<int64_t> shape, Init init, double lo, double hi) {
  TensorPlan p = Plan(std::move(name), std::move(shape));
  p.init = init;
  p.lo = lo;
  p.hi = hi;
  return p;
}
// An F32 vector of exactly these values.
TensorPlan Values(std::string name, std::vector<float> values) {
  TensorPlan p = Plan(std::move(name), {static_cast<int64_t>(values.size())});
  p.init = Init::kValues;
  p.values = std::move(values);
  return p;
}

float RopeTheta(const SyntheticSpec& s) {
  if (s.rope_theta > 0) return s.rope_theta;
  const std::string_view t = SyntheticTrunk(s);
  return t == "llama" || t == "granite" || t == "phi3" ? 1e4f
         : t == "qwen35"                               ? 1e7f
         : t == "gpt-oss"                              ? 150000.0f
                                                       : 1e6f;
}

// A 3-D expert tensor [in, out, n_expert], std 1/sqrt(in) (each expert's
// slice drawn from its own stream), stored in the weight type.
TensorPlan Experts(std::string name, int64_t in, int64_t out, int64_t n_expert, int64_t layer) {
  TensorPlan p = Matrix(std::move(name), in, out, layer);
  p.shape.push_back(n_expert);
  return p;
}

// The mixture-of-experts FFN of layer i (SyntheticSpec): the router (F32, as
// llama.cpp's quantizer leaves it), its biases, the experts and the shared
// expert, in the order of llama.cpp's files.
void PlanMoeFfn(const SyntheticSpec& s, int64_t i, std::vector<TensorPlan>* plan) {
  const int64_t e = s.n_embd, ne = s.n_expert, ff = s.n_ff_expert, fs = s.n_ff_shared;
  const bool nemotron = s.arch == "nemotron_h_moe", oss = s.arch == "gpt-oss";
  plan->push_back(Normal(Blk(i, "ffn_gate_inp.weight"), {e, ne},
                         (nemotron ? 1.5f : 2.0f) / std::sqrt(float(e))));
  if (oss) plan->push_back(Normal(Blk(i, "ffn_gate_inp.bias"), {ne}, 0.5f));
  if (nemotron) plan->push_back(Normal(Blk(i, "exp_probs_b.bias"), {ne}, 0.1f));
  if (!nemotron) plan->push_back(Experts(Blk(i, "ffn_gate_exps.weight"), e, ff, ne, i));
  plan->push_back(Experts(Blk(i, "ffn_up_exps.weight"), e, ff, ne, i));
  plan->push_back(Experts(Blk(i, "ffn_down_exps.weight"), ff, e, ne, i));
  if (oss) {
    plan->push_back(Normal(Blk(i, "ffn_gate_exps.bias"), {ff, ne}, 0.1f));
    plan->push_back(Normal(Blk(i, "ffn_up_exps.bias"), {ff, ne}, 0.1f));
    plan->push_back(Normal(Blk(i, "ffn_down_exps.bias"), {e, ne}, 0.1f));
  }
  if (s.arch == "qwen35moe") {
    plan->push_back(Normal(Blk(i, "ffn_gate_inp_shexp.weight"), {e}, 1 / std::sqrt(float(e))));
    plan->push_back(Matrix(Blk(i, "ffn_gate_shexp.weight"), e, fs, i));
  }
  if (s.arch == "qwen35moe" || nemotron) {
    plan->push_back(Matrix(Blk(i, "ffn_up_shexp.weight"), e, fs, i));
    plan->push_back(Matrix(Blk(i, "ffn_down_shexp.weight"), fs, e, i));
  }
}
int64_t RopeDims(const SyntheticSpec& s, int64_t hd) { return s.rope_dims > 0 ? s.rope_dims : hd; }

// Llama 3.1 / 3.2 rope_freqs (the header's rule, in f32 as the converter computes it).
std::vector<float> Llama3RopeFreqs(const SyntheticSpec& s, int64_t n_rot) {
  const float factor = s.llama3_rope_factor, lo = s.llama3_low_freq_factor,
              hi = s.llama3_high_freq_factor, ctx = static_cast<float>(s.rope_orig_ctx);
  std::vector<float> out;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const float freq = std::pow(RopeTheta(s), -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
    const float wavelen = 2.0f * 3.14159265358979f / freq;
    if (wavelen < ctx / hi) {
      out.push_back(1.0f);
    } else if (wavelen > ctx / lo) {
      out.push_back(factor);
    } else {
      const float t = (ctx / wavelen - lo) / (hi - lo);
      out.push_back(1.0f / ((1.0f - t) / factor + t));
    }
  }
  return out;
}

// phi3's LongRoPE tables: long from 1 (fast pairs) to n_ctx / C (slow pairs)
// along a square ramp, short from 1 to 1.5.
std::vector<float> LongRopeFactors(const SyntheticSpec& s, int64_t n_rot, bool long_set) {
  const int64_t half = n_rot / 2;
  const float stretch = std::max(1.0f, static_cast<float>(s.n_ctx) / static_cast<float>(s.rope_orig_ctx));
  std::vector<float> out;
  for (int64_t i = 0; i < half; ++i) {
    const float t = half > 1 ? static_cast<float>(i) / static_cast<float>(half - 1) : 0.0f;
    out.push_back(long_set ? 1.0f + (stretch - 1.0f) * t * t : 1.0f + 0.5f * t);
  }
  return out;
}

// phi3: fused attn_qkv (rows q | k | v) and ffn_up (rows gate | up).
void PlanPhi3Layer(const SyntheticSpec& s, int64_t i, int64_t hd, std::vector<TensorPlan>* plan) {
  const int64_t e = s.n_embd, q_dim = s.n_head * hd, kv_dim = s.n_kv_head * hd;
  plan->push_back(Norm(Blk(i, "attn_norm.weight"), {e}));
  plan->push_back(Matrix(Blk(i, "attn_qkv.weight"), e, q_dim + 2 * kv_dim, i));
  plan->push_back(Matrix(Blk(i, "attn_output.weight"), q_dim, e));
  plan->push_back(Norm(Blk(i, "ffn_norm.weight"), {e}));
  plan->push_back(Matrix(Blk(i, "ffn_up.weight"), e, 2 * s.n_ff));
  plan->push_back(Matrix(Blk(i, "ffn_down.weight"), s.n_ff, e, i));
}

// llama, qwen2, qwen3, smollm3, granite: attention + SwiGLU FFN; gemma3:
// q/k norms, norms after attention and FFN (GELU-gated FFN, same tensors).
void PlanDenseLayer(const SyntheticSpec& s, int64_t i, int64_t hd, std::vector<TensorPlan>* plan) {
  const int64_t e = s.n_embd, q_dim = s.n_head * hd, kv_dim = s.n_kv_head * hd;
  plan->push_back(Norm(Blk(i, "attn_norm.weight"), {e}));
  plan->push_back(Matrix(Blk(i, "attn_q.weight"), e, q_dim));
  plan->push_back(Matrix(Blk(i, "attn_k.weight"), e, kv_dim));
  plan->push_back(Matrix(Blk(i, "attn_v.weight"), e, kv_dim, i));
  const bool oss = s.arch == "gpt-oss";
  if (s.arch == "qwen2" || oss) {
    const float std = oss ? 0.3f : 0.5f;
    plan->push_back(Normal(Blk(i, "attn_q.bias"), {q_dim}, std));
    plan->push_back(Normal(Blk(i, "attn_k.bias"), {kv_dim}, std));
    plan->push_back(Normal(Blk(i, "attn_v.bias"), {kv_dim}, std));
  }
  const bool gemma3 = s.arch == "gemma3";
  if (SyntheticTrunk(s) == "qwen3" || gemma3) {
    plan->push_back(Norm(Blk(i, "attn_q_norm.weight"), {hd}));
    plan->push_back(Norm(Blk(i, "attn_k_norm.weight"), {hd}));
  }
  plan->push_back(Matrix(Blk(i, "attn_output.weight"), q_dim, e));
  if (oss) {
    plan->push_back(Normal(Blk(i, "attn_output.bias"), {e}, 0.1f));
    plan->push_back(Normal(Blk(i, "attn_sinks.weight"), {s.n_head}, 1.0f));
  }
  if (gemma3 || oss) plan->push_back(Norm(Blk(i, "post_attention_norm.weight"), {e}));
  if (SyntheticMoe(s)) {
    if (!oss) plan->push_back(Norm(Blk(i, "ffn_norm.weight"), {e}));
    PlanMoeFfn(s, i, plan);
    return;
  }
  plan->push_back(Norm(Blk(i, "ffn_norm.weight"), {e}));
  plan->push_back(Matrix(Blk(i, "ffn_gate.weight"), e, s.n_ff));
  plan->push_back(Matrix(Blk(i, "ffn_up.weight"), e, s.n_ff));
  plan->push_back(Matrix(Blk(i, "ffn_down.weight"), s.n_ff, e, i));
  if (gemma3) plan->push_back(Norm(Blk(i, "post_ffw_norm.weight"), {e}));
}

// nemotron_h: one of Mamba2 ('M'), attention ('*') or MLP ('-') per layer.
void PlanNemotronHLayer(const SyntheticSpec& s, int64_t i, int64_t hd,
                        std::vector<TensorPlan>* plan) {
  const int64_t e = s.n_embd, q_dim = s.n_head * hd, kv_dim = s.n_kv_head * hd;
  const int64_t d_inner = SyntheticMambaInner(s), n_ssm_head = d_inner / s.ssm_head_dim;
  const int64_t n_ch = d_inner + 2 * s.ssm_groups * s.ssm_state;
  const char kind = s.layer_pattern[static_cast<size_t>(i) % s.layer_pattern.size()];
  plan->push_back(Norm(Blk(i, "attn_norm.weight"), {e}));
  if (kind == 'M') {
    plan->push_back(Matrix(Blk(i, "ssm_in.weight"), e, d_inner + n_ch + n_ssm_head, i));
    plan->push_back(Normal(Blk(i, "ssm_conv1d.weight"), {s.ssm_conv, n_ch}, 0.5f));
    plan->push_back(Normal(Blk(i, "ssm_conv1d.bias"), {n_ch}, 0.1f));
    plan->push_back(Ranged(Blk(i, "ssm_dt.bias"), {n_ssm_head}, Init::kDtBias, 1e-3, 1e-1));
    plan->push_back(Ranged(Blk(i, "ssm_a"), {1, n_ssm_head}, Init::kNegUniform, 1, 8));
    plan->push_back(Norm(Blk(i, "ssm_d"), {1, n_ssm_head}));
    plan->push_back(Norm(Blk(i, "ssm_norm.weight"),
                         s.ssm_groups == 1
                             ? std::vector<int64_t>{d_inner}
                             : std::vector<int64_t>{d_inner / s.ssm_groups, s.ssm_groups}));
    plan->push_back(Matrix(Blk(i, "ssm_out.weight"), d_inner, e, i));
  } else if (kind == '*') {
    plan->push_back(Matrix(Blk(i, "attn_q.weight"), e, q_dim));
    plan->push_back(Matrix(Blk(i, "attn_k.weight"), e, kv_dim));
    plan->push_back(Matrix(Blk(i, "attn_v.weight"), e, kv_dim, i));
    plan->push_back(Matrix(Blk(i, "attn_output.weight"), q_dim, e));
  } else if (SyntheticMoe(s)) {
    PlanMoeFfn(s, i, plan);
  } else {
    plan->push_back(Matrix(Blk(i, "ffn_up.weight"), e, s.n_ff));
    plan->push_back(Matrix(Blk(i, "ffn_down.weight"), s.n_ff, e, i));
  }
}

// qwen35: Gated DeltaNet or gated full attention, then a SwiGLU FFN; in the
// order and shapes of llama.cpp's files (../shared/ref/README.md, qwen35).
void PlanQwen35Layer(const SyntheticSpec& s, int64_t i, int64_t hd, std::vector<TensorPlan>* plan) {
  const int64_t e = s.n_embd, q_dim = s.n_head * hd, kv_dim = s.n_kv_head * hd;
  const int64_t nv = s.linear_value_heads;
  const Qwen35Dims d = DimsOf(s, hd);
  plan->push_back(Norm(Blk(i, "attn_norm.weight"), {e}));
  plan->push_back(Norm(Blk(i, "post_attention_norm.weight"), {e}));
  if (IsQwen35Attention(s, i)) {
    plan->push_back(Matrix(Blk(i, "attn_q.weight"), e, 2 * q_dim));  // per head [q | gate]
    plan->push_back(Matrix(Blk(i, "attn_k.weight"), e, kv_dim));
    plan->push_back(Matrix(Blk(i, "attn_v.weight"), e, kv_dim, i));
    plan->push_back(Norm(Blk(i, "attn_q_norm.weight"), {hd}));
    plan->push_back(Norm(Blk(i, "attn_k_norm.weight"), {hd}));
    plan->push_back(Matrix(Blk(i, "attn_output.weight"), q_dim, e));
  } else {
    plan->push_back(Matrix(Blk(i, "attn_qkv.weight"), e, d.conv_dim, i));
    plan->push_back(Matrix(Blk(i, "attn_gate.weight"), e, d.value_dim));  // z
    plan->push_back(Normal(Blk(i, "ssm_conv1d.weight"), {s.ssm_conv, d.conv_dim}, 0.5f));
    plan->push_back(Ranged(Blk(i, "ssm_dt.bias"), {nv}, Init::kDtBias, 0.05, 1));
    plan->push_back(Ranged(Blk(i, "ssm_a"), {nv}, Init::kNegUniform, 0.05, 1));
    TensorPlan alpha = Matrix(Blk(i, "ssm_alpha.weight"), e, nv);
    alpha.std *= 0.5f;  // with dt and A below: per-token decay exp(g) mostly in [0.37, 0.998]
    plan->push_back(std::move(alpha));
    plan->push_back(Matrix(Blk(i, "ssm_beta.weight"), e, nv));
    plan->push_back(Norm(Blk(i, "ssm_norm.weight"), {s.linear_head_dim}));
    plan->push_back(Matrix(Blk(i, "ssm_out.weight"), d.value_dim, e));
  }
  if (SyntheticMoe(s)) {
    PlanMoeFfn(s, i, plan);
    return;
  }
  plan->push_back(Matrix(Blk(i, "ffn_gate.weight"), e, s.n_ff));
  plan->push_back(Matrix(Blk(i, "ffn_up.weight"), e, s.n_ff));
  plan->push_back(Matrix(Blk(i, "ffn_down.weight"), s.n_ff, e, i));
}

// Every tensor of the model, in llama.cpp's usual order.
std::vector<TensorPlan> PlanTensors(const SyntheticSpec& s, int64_t hd) {
  std::vector<TensorPlan> plan;
  const int64_t e = s.n_embd;
  TensorPlan embd = Matrix("token_embd.weight", e, s.n_vocab);
  embd.std = s.tied_embeddings ? 0.15f : 1.0f;
  plan.push_back(std::move(embd));
  if (s.llama3_rope_factor != 0) plan.push_back(Values("rope_freqs.weight", Llama3RopeFreqs(s, hd)));
  if (s.arch == "phi3") {
    plan.push_back(Values("rope_factors_long.weight", LongRopeFactors(s, RopeDims(s, hd), true)));
    plan.push_back(Values("rope_factors_short.weight", LongRopeFactors(s, RopeDims(s, hd), false)));
  }
  for (int64_t i = 0; i < s.n_layer; ++i) {
    if (SyntheticTrunk(s) == "nemotron_h") {
      PlanNemotronHLayer(s, i, hd, &plan);
    } else if (SyntheticTrunk(s) == "qwen35") {
      PlanQwen35Layer(s, i, hd, &plan);
    } else if (s.arch == "phi3") {
      PlanPhi3Layer(s, i, hd, &plan);
    } else {
      PlanDenseLayer(s, i, hd, &plan);
    }
  }
  plan.push_back(Norm("output_norm.weight", {e}));
  if (!s.tied_embeddings) {
    TensorPlan head = Matrix("output.weight", e, s.n_vocab);
    head.std *= 2;
    plan.push_back(std::move(head));
  }
  return plan;
}

// The experts' keys (SyntheticSpec), as llama.cpp's converters write them.
void WriteMoeMetadata(const SyntheticSpec& s, gguf::GgufWriter* w) {
  const std::string& a = s.arch;
  w->SetU32(a + ".expert_count", static_cast<uint32_t>(s.n_expert));
  w->SetU32(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
  w->SetU32(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_expert));
  if (a == "qwen35moe" || a == "nemotron_h_moe") {
    w->SetU32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(s.n_ff_shared));
  }
  if (a == "nemotron_h_moe") {
    w->SetU32(a + ".expert_shared_count", 1);
    w->SetBool(a + ".expert_weights_norm", true);
    w->SetF32(a + ".expert_weights_scale", s.expert_weights_scale);
  }
  if (s.expert_groups > 1) {
    w->SetU32(a + ".expert_group_count", static_cast<uint32_t>(s.expert_groups));
    w->SetU32(a + ".expert_group_used_count", static_cast<uint32_t>(s.expert_groups_used));
  }
}

// The architecture's hyper-parameters, as llama.cpp reads them.
void WriteArchMetadata(const SyntheticSpec& s, int64_t hd, gguf::GgufWriter* w) {
  const std::string& a = s.arch;
  const int64_t e = s.n_embd;
  const float theta = RopeTheta(s);
  w->SetU32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w->SetU32(a + ".embedding_length", static_cast<uint32_t>(e));
  w->SetU32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  if (SyntheticMoe(s)) WriteMoeMetadata(s, w);
  if (SyntheticTrunk(s) == "qwen35") {  // in the order of llama.cpp's own files
    const Qwen35Dims d = DimsOf(s, hd);
    if (!SyntheticMoe(s)) w->SetU32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w->SetU32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
    w->SetU32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_head));
    w->SetU32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w->SetU32(a + ".attention.value_length", static_cast<uint32_t>(hd));
    w->SetU32(a + ".rope.dimension_count", static_cast<uint32_t>(d.n_rot));
    w->SetI32Array(a + ".rope.dimension_sections", {d.sections.begin(), d.sections.end()});
    w->SetF32(a + ".rope.freq_base", theta);
    w->SetF32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
    w->SetU32(a + ".ssm.conv_kernel", static_cast<uint32_t>(s.ssm_conv));
    w->SetU32(a + ".ssm.inner_size", static_cast<uint32_t>(d.value_dim));
    w->SetU32(a + ".ssm.state_size", static_cast<uint32_t>(s.linear_head_dim));
    w->SetU32(a + ".ssm.time_step_rank", static_cast<uint32_t>(s.linear_value_heads));
    w->SetU32(a + ".ssm.group_count", static_cast<uint32_t>(s.linear_key_heads));
    w->SetU32(a + ".full_attention_interval", static_cast<uint32_t>(s.full_attention_interval));
    w->SetU32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));
    return;
  }
  const bool hybrid = SyntheticTrunk(s) == "nemotron_h";
  if (hybrid) {
    auto kind = [&](int64_t i) {
      return s.layer_pattern[static_cast<size_t>(i) % s.layer_pattern.size()];
    };
    const int64_t d_inner = SyntheticMambaInner(s);
    const int64_t n_ff = SyntheticMoe(s) ? s.n_ff_expert : s.n_ff;
    std::vector<int32_t> ff, kv;
    for (int64_t i = 0; i < s.n_layer; ++i) {
      ff.push_back(kind(i) == '-' ? static_cast<int32_t>(n_ff) : 0);
      kv.push_back(kind(i) == '*' ? static_cast<int32_t>(s.n_kv_head) : 0);
    }
    w->SetI32Array(a + ".feed_forward_length", ff);
    w->SetI32Array(a + ".attention.head_count_kv", kv);
    w->SetU32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
    w->SetF32(a + ".attention.layer_norm_epsilon", 1e-5f);
    w->SetU32(a + ".ssm.conv_kernel", static_cast<uint32_t>(s.ssm_conv));
    w->SetU32(a + ".ssm.inner_size", static_cast<uint32_t>(d_inner));
    w->SetU32(a + ".ssm.state_size", static_cast<uint32_t>(s.ssm_state));
    w->SetU32(a + ".ssm.time_step_rank", static_cast<uint32_t>(d_inner / s.ssm_head_dim));
    w->SetU32(a + ".ssm.group_count", static_cast<uint32_t>(s.ssm_groups));
  } else {
    w->SetU32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w->SetU32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
    w->SetU32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_head));
  }
  if (a != "phi3") {  // phi3's heads are always n_embd / n_head wide
    w->SetU32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w->SetU32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  const bool eps_1e5 = a == "llama" || a == "granite" || a == "phi3" || hybrid || a == "gpt-oss";
  w->SetF32(a + ".attention.layer_norm_rms_epsilon", eps_1e5 ? 1e-5f : 1e-6f);
  w->SetF32(a + ".rope.freq_base", theta);
  if (a == "gpt-oss") {  // no rope.dimension_count: whole heads; YaRN as the real files
    w->SetString(a + ".rope.scaling.type", "yarn");
    w->SetF32(a + ".rope.scaling.factor", 32.0f);
    w->SetU32(a + ".rope.scaling.original_context_length", 4096);
    w->SetU32(a + ".attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
    return;
  }
  w->SetU32(a + ".rope.dimension_count", static_cast<uint32_t>(RopeDims(s, hd)));
  if (a == "phi3") {
    const double stretch = std::max(1.0, double(s.n_ctx) / double(s.rope_orig_ctx));
    w->SetU32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(s.rope_orig_ctx));
    w->SetF32(a + ".rope.scaling.attn_factor",
              static_cast<float>(std::sqrt(1 + std::log(stretch) / std::log(double(s.rope_orig_ctx)))));
    w->SetU32(a + ".attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  }
  if (a == "gemma3") {
    if (s.sliding_window > 0)
      w->SetU32(a + ".attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
    if (s.sliding_window_pattern > 0) {
      w->SetU32(a + ".attention.sliding_window_pattern",
                static_cast<uint32_t>(s.sliding_window_pattern));
    }
    w->SetF32(a + ".rope.freq_base_swa", s.rope_theta_swa);
  }
  if (a == "granite") {
    w->SetF32(a + ".embedding_scale", s.granite_embedding_scale);
    w->SetF32(a + ".residual_scale", s.granite_residual_scale);
    w->SetF32(a + ".attention.scale", s.granite_attention_scale);
    w->SetF32(a + ".logit_scale", s.granite_logit_scale);
  }
}

void WriteTokenizer(const SyntheticSpec& s, gguf::GgufWriter* w) {
  SyntheticVocab vocab = BuildSyntheticVocab(s.n_vocab);
  const auto n_tok = static_cast<int32_t>(vocab.tokens.size());
  w->SetString("tokenizer.ggml.model", "gpt2");
  // llama.cpp's pre-tokenizer names; "qwen35" is Qwen 3.5's own split rule.
  const bool qwen35 = SyntheticTrunk(s) == "qwen35";
  w->SetString("tokenizer.ggml.pre", qwen35 ? "qwen35" : "qwen2");
  w->SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w->SetI32Array("tokenizer.ggml.token_type", vocab.types);
  w->SetStringArray("tokenizer.ggml.merges", vocab.merges);
  w->SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(n_tok - 3));
  w->SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(n_tok - 1));
  w->SetU32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(n_tok - 3));
  w->SetBool("tokenizer.ggml.add_bos_token", false);
  if (qwen35) w->SetBool("tokenizer.ggml.add_eos_token", false);  // as ref/tiny-qwen35
  w->SetString("tokenizer.chat_template", s.chat_template.empty() ? kChatmlTemplate : s.chat_template);
}

// One row of `p`'s values, drawn from `rng`.
void DrawRow(const TensorPlan& p, Rng* rng, std::vector<float>* row) {
  for (auto& x : *row) {
    switch (p.init) {
      case Init::kNormal:
        x = p.std * rng->Normal();
        break;
      case Init::kNormWeight:
        x = 1.0f + 0.1f * rng->Normal();
        break;
      case Init::kNegUniform: {
        const auto lo = static_cast<float>(p.lo), hi = static_cast<float>(p.hi);
        x = -(lo + (hi - lo) * static_cast<float>(rng->Uniform()));
        break;
      }
      case Init::kValues:
        x = p.values[static_cast<size_t>(&x - row->data())];
        break;
      case Init::kDtBias: {
        const double dt0 =
            std::exp(std::log(p.lo) + (std::log(p.hi) - std::log(p.lo)) * rng->Uniform());
        x = static_cast<float>(std::log(std::expm1(dt0)));
        break;
      }
    }
  }
}

}  // namespace

Status WriteSyntheticModel(Env* env, const SyntheticSpec& s, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress) {
  MX_RETURN_IF_ERROR(ValidateSyntheticSpec(s));
  const int64_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;

  gguf::GgufWriter w;
  w.SetString("general.architecture", s.arch);
  w.SetString("general.name", s.name);
  w.SetU32("general.file_type", FileType(s));
  WriteArchMetadata(s, hd, &w);
  WriteTokenizer(s, &w);

  const std::vector<TensorPlan> plan = PlanTensors(s, hd);
  auto n_values = [](const TensorPlan& p) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    return static_cast<uint64_t>(n);
  };
  auto type_of = [&](const TensorPlan& p) {
    if (!p.matrix) return DType::kF32;
    return s.q4_k_m ? Q4KMTensorType(s, p.name, p.layer, p.shape[0]) : s.weight_type;
  };
  uint64_t total = 0, done = 0;
  for (const TensorPlan& p : plan) {
    total += n_values(p);
    MX_RETURN_IF_ERROR(w.DeclareTensor(p.name, type_of(p), p.shape));
  }
  // Tensors are drawn one at a time and written as they come (a model may
  // be larger than memory); a 3-D expert tensor's experts each draw from
  // their own stream, on several threads.
  ThreadPool pool(static_cast<int>(std::max(1u, std::min(16u, std::thread::hardware_concurrency()))));
  auto fill = [&](size_t index, std::string* bytes) -> Status {
    const TensorPlan& p = plan[index];
    const DType type = type_of(p);
    const int64_t cols = p.shape[0], rows = static_cast<int64_t>(n_values(p)) / cols;
    const size_t rb = RowBytes(type, cols);
    bytes->resize(rb * static_cast<size_t>(rows));
    auto* out = reinterpret_cast<uint8_t*>(bytes->data());
    const int64_t n_parts = p.shape.size() == 3 ? p.shape[2] : 1, part_rows = rows / n_parts;
    pool.ParallelFor(n_parts, [&](int64_t part, int) {
      Rng rng(HashName(s.seed, n_parts == 1 ? p.name : p.name + "#" + std::to_string(part)));
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = part * part_rows; r < (part + 1) * part_rows; ++r) {
        DrawRow(p, &rng, &row);
        kernels::QuantizeRow(type, row.data(), out + r * rb, cols);
      }
    });
    done += n_values(p);
    if (progress) progress(done, total);
    return Status::Ok();
  };
  return w.WriteStreaming(env, path, fill);
}

}  // namespace mx::models
