// Synthetic GGUF models of any shape, with deterministic pseudo-random
// weights and a real byte-level BPE tokenizer plus a ChatML template in the
// metadata. `matricxon make-model`, tests and benchmarks use them, so that no
// downloaded model is ever needed.
//
// Weights follow ../shared/ref/README.md's recipe (so activations stay sane
// at any depth): projections N(0, 1/fan_in), an untied output head
// N(0, 4/fan_in), norm weights 1 + 0.1 N(0, 1), token embeddings N(0, 1)
// (0.15 when tied to the output head), qwen2 q/k/v biases N(0, 0.25); for
// qwen35 also ssm_alpha N(0, 0.25/fan_in), ssm_conv1d N(0, 0.25),
// ssm_dt.bias = softplus^-1(dt0) with dt0 log-uniform in [0.05, 1] and
// ssm_a = -U[0.05, 1].
// Every tensor draws from its own stream seeded by (seed, tensor name), so
// the same spec always writes the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"

namespace mx::models {

struct SyntheticSpec {
  std::string name = "synthetic";
  std::string arch = "llama";  // llama, qwen2, qwen3, nemotron_h, qwen35,
                               // smollm3, granite, phi3, gemma3, and the
                               // mixtures of experts qwen3moe, qwen35moe,
                               // nemotron_h_moe, gpt-oss
  int64_t n_layer = 4;
  int64_t n_embd = 128;
  int64_t n_head = 4;
  int64_t n_kv_head = 2;
  int64_t head_dim = 0;  // attention.key_length = value_length; 0: n_embd / n_head
  int64_t n_ff = 256;
  int64_t n_vocab = 4096;
  int64_t n_ctx = 2048;
  DType weight_type = DType::kF32;  // 2-D matrices; norms and biases stay F32
  // Instead of one weight type, the mix llama.cpp's quantizer writes for
  // Q4_K_M (see Q4KMTensorType); weight_type is then ignored.
  bool q4_k_m = false;
  bool tied_embeddings = false;
  float rope_theta = 0;  // 0: 1e4 for llama, 1e7 for qwen35, 1e6 for the others
  uint64_t seed = 1;
  // tokenizer.chat_template (Jinja text); empty: kChatmlTemplate.
  std::string chat_template;
  // nemotron_h (hybrid): the layer kinds, repeated to n_layer: 'M' Mamba2,
  // '*' attention (no RoPE), '-' MLP (up, ReLU^2, down). The Mamba2 layers
  // have d_inner = 2 * n_embd split in heads of ssm_head_dim, ssm_groups
  // groups, ssm_state state size and a causal conv of ssm_conv taps.
  std::string layer_pattern = "M-M*-M*-";
  int64_t ssm_state = 16;
  int64_t ssm_groups = 2;
  int64_t ssm_head_dim = 32;
  int64_t ssm_conv = 4;  // conv taps of Mamba2 and of Gated DeltaNet (ssm.conv_kernel)
  // qwen35 (Qwen 3.5 hybrid): layer i is gated full attention when
  // (i + 1) % full_attention_interval == 0, else Gated DeltaNet. Attention has
  // n_head query heads of head_dim (attn_q also holds a sigmoid gate per query
  // value), n_kv_head kv heads, q/k RMS norms and IMRoPE over the first
  // rope_dims dims of a head. DeltaNet has linear_key_heads q/k heads and
  // linear_value_heads v heads, all linear_head_dim wide, and a causal conv of
  // ssm_conv taps over q, k and v.
  int64_t full_attention_interval = 4;  // qwen35.full_attention_interval
  int64_t linear_key_heads = 2;         // ssm.group_count
  int64_t linear_value_heads = 4;       // ssm.time_step_rank; a multiple of linear_key_heads
  int64_t linear_head_dim = 32;         // ssm.state_size (q, k and v heads)
  // ssm.inner_size; 0: linear_value_heads * linear_head_dim, the only value
  // llama.cpp accepts (it sizes the conv state from it).
  int64_t linear_inner = 0;
  int64_t rope_dims = 0;  // rope.dimension_count; 0: the whole head. qwen35 and phi3 only.
  // llama: Llama 3.1 / 3.2 frequency factors (rope_freqs.weight) as the HF
  // converter computes them for rope_type "llama3": pair i with wavelength
  // w = 2 pi / base^(-2i/d) gets 1 when w < C / high, factor when w > C / low,
  // else 1 / ((1 - t) / factor + t), t = (C / w - low) / (high - low);
  // C = rope_orig_ctx. factor 0: no table.
  float llama3_rope_factor = 0;
  float llama3_low_freq_factor = 1;
  float llama3_high_freq_factor = 4;
  // phi3 (LongRoPE, fused attn_qkv and ffn_up): the training context the
  // factors stretch (rope.scaling.original_context_length; llama3 table's C
  // too). phi3 writes rope_factors_long ramping from 1 to n_ctx /
  // rope_orig_ctx and rope_factors_short from 1 to 1.5, attn_factor
  // sqrt(1 + ln(n_ctx / C) / ln(C)), and sliding_window (ignored by readers).
  int64_t rope_orig_ctx = 8192;
  int64_t sliding_window = 0;
  // gemma3 (local : global sliding-window layers, two RoPE bases, q/k norms,
  // norms after attention and FFN, GELU-tanh gated FFN): sliding_window is
  // attention.sliding_window (0: every layer global); the pattern P makes
  // layer il local iff il % P < P - 1 (attention.sliding_window_pattern,
  // written only when not 0; readers default to 6); local layers rotate with
  // rope_theta_swa (rope.freq_base_swa), global ones with rope_theta.
  int64_t sliding_window_pattern = 0;
  float rope_theta_swa = 10000.0f;
  // granite: the four scales (granite.embedding_scale, residual_scale,
  // attention.scale, logit_scale), Granite 3.x's values by default.
  float granite_embedding_scale = 12.0f;
  float granite_residual_scale = 0.22f;
  float granite_attention_scale = 0.0078125f;
  float granite_logit_scale = 8.0f;
  // Mixtures of experts: every FFN (nemotron_h_moe: the '-' layers of the
  // pattern) is n_expert experts of n_ff_expert, n_expert_used of them run
  // per token, behind a router (F32, as llama.cpp's quantizer leaves it).
  // qwen35moe and nemotron_h_moe add a shared expert of n_ff_shared
  // (qwen35moe's behind a sigmoid gate); nemotron_h_moe's experts form
  // expert_groups groups of which expert_groups_used compete (0: no groups)
  // and their weights are renormalised and scaled by expert_weights_scale.
  // gpt-oss: q/k/v/o biases, attention sinks, sliding_window on every other
  // layer (default 128), YaRN (factor 32 from 4096), expert biases.
  int64_t n_expert = 8;
  int64_t n_expert_used = 2;
  int64_t n_ff_expert = 64;
  int64_t n_ff_shared = 128;
  int64_t expert_groups = 0;
  int64_t expert_groups_used = 0;
  float expert_weights_scale = 2.5f;
  // nemotron_h / nemotron_h_moe: the Mamba2 layers' ssm.inner_size; 0: 2 * n_embd.
  int64_t mamba_inner = 0;
  // rope.dimension_sections: pairs of rotated dims per (t, h, w, extra)
  // position component; they sum to rope_dims / 2. All zero: the pairs are
  // dealt round-robin over t, h, w ([11, 11, 10, 0] for 64 dims). qwen35 only.
  std::array<int32_t, 4> rope_sections = {0, 0, 0, 0};
};

// Named shapes: "tiny" (the ref tiny-llama shape), "tiny-hybrid" (the ref
// tiny-hybrid-nemotron_h shape), "tiny-qwen35" (the ref tiny-qwen35 shape and
// metadata), "smollm2-135m", "qwen3-0.6b", "qwen3.5-0.8b", "llama-135m",
// "llama-3.2-1b" (Llama 3.2 1B with its frequency factors), "phi-4-mini"
// (Phi-4-mini: LongRoPE, partial rotary, fused projections), "tiny-gemma3"
// (the ref tiny-gemma3 shape: window 32), "gemma-3-1b" (Gemma 3 1B: window
// 512, 5 local : 1 global).
// InvalidArgument listing the names otherwise.
Result<SyntheticSpec> SyntheticPreset(std::string_view preset);
std::vector<std::string> SyntheticPresetNames();

// The family whose layers an arch's trunk is written as: qwen3moe -> qwen3,
// qwen35moe -> qwen35, nemotron_h_moe -> nemotron_h; itself otherwise.
std::string_view SyntheticTrunk(const SyntheticSpec& spec);
// True for the mixtures of experts (qwen3moe, qwen35moe, nemotron_h_moe, gpt-oss).
bool SyntheticMoe(const SyntheticSpec& spec);
// nemotron_h's Mamba2 inner size (mamba_inner, else 2 * n_embd).
inline int64_t SyntheticMambaInner(const SyntheticSpec& s) {
  return s.mamba_inner > 0 ? s.mamba_inner : 2 * s.n_embd;
}

// Checks the spec (positive sizes, heads dividing, the weight type writable
// and matching the row lengths). Errors name the field.
Status ValidateSyntheticSpec(const SyntheticSpec& spec);

// The type llama.cpp's Q4_K_M quantization gives a matrix: Q4_K, with Q6_K
// for the output head (the token embeddings when tied) and for the attn_v /
// attn_qkv / ffn_down of layers where llama.cpp's "use more bits" rule holds
// (the first and last eighth of the layers and every third one between; for
// qwen35, whose every layer has one attn_v or attn_qkv, llama.cpp's count of
// those tensors is the layer index); a matrix whose
// rows are not a multiple of 256 values falls back to Q5_0 (for Q4_K) or Q8_0
// (for Q6_K). `name` is the tensor name, `layer` its block index (or -1).
DType Q4KMTensorType(const SyntheticSpec& spec, std::string_view name, int64_t layer,
                     int64_t n_cols);

// Writes the model to `path` atomically. progress(done, total) in bytes.
Status WriteSyntheticModel(Env* env, const SyntheticSpec& spec, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress = {});

// The byte-level BPE vocabulary make-model writes: 256 byte tokens, merges
// learned from a built-in English corpus, unused padding tokens, then
// <|endoftext|>, <|im_start|>, <|im_end|> as the last three ids.
struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
};
SyntheticVocab BuildSyntheticVocab(int64_t n_vocab);

// The ChatML template written into every synthetic model.
extern const char kChatmlTemplate[];

}  // namespace mx::models
