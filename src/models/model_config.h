// ModelConfig: the hyperparameters of a model, read from GGUF metadata
// (ENGINE-FACTS §1.5) and validated once, as plain data. Per-layer entries
// carry what differs between layers (hybrid models mix layer kinds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "kernels/kernels.h"

namespace mx::models {

enum class Arch {
  kLlama,
  kQwen2,
  kQwen3,
  kNemotronH,
  kQwen35,
  kSmolLm3,
  kGranite,
  kPhi3,
  kGemma3,
  kMistral3,
  kQwen3Moe,
  kQwen35Moe,
  kNemotronHMoe,
  kGptOss,
};
const char* ArchName(Arch arch);

// What a layer does to the residual stream x, in two steps:
//   x += Mixer(rms(x, attn_norm));   x += Ffn(rms(x, ffn_norm))
// (either step may be absent). Each architecture file (arch_*.cc) says which
// mixer and FFN its layers have; the runner has one block per kind.
enum class Mixer {
  kNone,
  kAttention,       // causal softmax attention with GQA, optional RoPE / biases / q-k norms
  kGatedAttention,  // attention whose output is multiplied by sigmoid(gate) (qwen35)
  kMamba2,          // Mamba2 selective state space mixer (nemotron_h)
  kDeltaNet,        // Gated DeltaNet linear attention (qwen35)
};
enum class Ffn {
  kNone,
  kSwiGlu,       // down(silu(gate x) * up x)
  kReluSquared,  // down(relu(up x)^2) (nemotron_h)
  kGeGlu,        // down(gelu_tanh(gate x) * up x), llama.cpp's f16-table GELU (gemma3)
  // gpt-oss's experts: down(g' sigmoid(1.702 g') (u' + 1)) with g' = min(gate x, 7),
  // u' = clamp(up x, -7, 7) (biases after each product)
  kSwiGluClamped,
  kMoe,  // a mixture of experts (ModelConfig::moe) after its router
};

// How a mixture-of-experts router turns its logits into the chosen experts'
// weights (ref/README-moe.md "Routing").
enum class MoeGating {
  kSoftmax,        // softmax over every expert; the weights are the chosen probabilities
  kSigmoid,        // sigmoid per expert
  kSoftmaxOfTopK,  // the k largest logits chosen, then a softmax over those k (gpt-oss)
};

// The mixture of experts of a model's Ffn::kMoe layers. Per token:
//   l = Wrouter u (+ router bias);  p = gating(l);  s = p (+ selection bias)
//   groups (n_group > 1): of n_expert / n_group consecutive experts, scored by
//     their two largest s; only the n_group_used best keep their experts
//   e_1..e_k = the k largest s, best first;  w_j = p[e_j]
//   normalize: w_j /= max(sum w, 2^-14);  w_j *= scale (when not 0 or 1)
//   moe = ((w_1 y_1 + w_2 y_2) + w_3 y_3) + ...,   y_j = expert_{e_j}(u)
//   ffn = moe (+ shared expert, times sigmoid(w_sg . u) when shared_gate)
struct MoeConfig {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // k
  int64_t n_ff_expert = 0;    // each expert's width
  int64_t n_ff_shared = 0;    // the shared expert's width; 0: none
  Ffn expert_ffn = Ffn::kSwiGlu;  // kSwiGlu, kReluSquared or kSwiGluClamped (also the shared one's)
  MoeGating gating = MoeGating::kSoftmax;
  bool normalize = false;
  float scale = 1.0f;
  int64_t n_group = 0;       // expert_group_count (0 or 1: no group limit)
  int64_t n_group_used = 0;  // expert_group_used_count
  bool router_bias = false;     // ffn_gate_inp.bias added to the logits (gpt-oss)
  bool selection_bias = false;  // exp_probs_b.bias added to choose only (nemotron_h_moe)
  bool expert_biases = false;   // ffn_{gate,up,down}_exps.bias (gpt-oss)
  bool shared_gate = false;     // ffn_gate_inp_shexp: the shared expert's sigmoid gate (qwen35moe)
};
const char* MixerName(Mixer mixer);

struct LayerConfig {
  Mixer mixer = Mixer::kAttention;
  Ffn ffn = Ffn::kSwiGlu;
  int n_head = 0;
  int n_kv_head = 0;
  int n_ff = 0;
  bool rope = true;  // false: an attention layer without RoPE (smollm3's NoPE layers)
  // Sliding-window attention (gemma3's local layers): a query at position p
  // sees keys at p - window + 1 ... p only; 0: every earlier key.
  int64_t window = 0;
  // RoPE of a local layer: ModelConfig::rope with rope_local_base and
  // frequency scale 1 (gemma3); false: ModelConfig::rope.
  bool rope_local = false;
  bool has_attention() const {
    return mixer == Mixer::kAttention || mixer == Mixer::kGatedAttention;
  }
  // Layers whose state is a fixed-size recurrent state (conv window + SSM /
  // DeltaNet matrix) instead of KV rows.
  bool is_recurrent() const { return mixer == Mixer::kMamba2 || mixer == Mixer::kDeltaNet; }
};

struct ModelConfig {
  Arch arch = Arch::kLlama;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t head_dim_k = 0;  // key_length
  int64_t head_dim_v = 0;  // value_length
  float rms_eps = 1e-5f;
  bool use_rope = true;
  // n_rot, base, linear scale, mode; YaRN (ext_factor 1, n_ctx_orig,
  // attn_factor); freq_factors stays null here: the tables are below.
  kernels::RopeParams rope;
  // RoPE frequency divisors per pair ([n_rot / 2] each, empty when the file
  // has none), read from the weights at load (BindRopeFactors):
  // rope_freqs.weight (Llama 3.1 / 3.2) for every context size; LongRoPE
  // (phi3) rope_factors_long when the context holds more than
  // rope.n_ctx_orig tokens, else rope_factors_short.
  std::vector<float> rope_freqs;
  std::vector<float> rope_factors_long;
  std::vector<float> rope_factors_short;
  // The table a context of n_ctx tokens rotates with (empty: none), chosen
  // once per context as llama.cpp does.
  const std::vector<float>& RopeFactorsFor(int64_t n_ctx) const;
  // Multi-section RoPE (qwen35 IMRoPE): dims per position component
  // [t, h, w, extra]. For text every component is the token position, which
  // makes it the plain NeoX rotation of the first n_rot dims. Empty otherwise.
  std::vector<int> rope_sections;
  // The base of the layers with LayerConfig::rope_local (gemma3
  // rope.freq_base_swa); their frequency scale is 1.
  float rope_local_base = 10000.0f;
  // True: local layers keep the file's frequency scale and YaRN (gpt-oss);
  // false: they rotate at scale 1 (gemma3).
  bool rope_local_scaled = false;
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3
  bool tied_output = false;  // output head = token_embd (decided from the tensors)
  // Scales (granite); the defaults leave the block as it is.
  float embedding_scale = 1.0f;  // x = E[tok] * embedding_scale
  float residual_scale = 1.0f;   // x += residual_scale * (mixer or FFN output)
  float attention_scale = 0.0f;  // softmax(q.k * attention_scale); 0: 1 / sqrt(head_dim)
  float logit_scale = 1.0f;      // logits = Wout h / logit_scale
  // gemma3: the mixer's and the FFN's outputs are RMS-normed before they are
  // added (post_attention_norm, post_ffw_norm).
  bool post_norms = false;
  // logits = cap * tanh(logits / cap) when > 0 (final_logit_softcapping).
  float final_logit_softcap = 0.0f;
  // Llama 4's attention temperature (mistral3): after RoPE, q at position p
  // times 1 + attn_temperature_scale * ln(floor(p / attn_temperature_floor) + 1).
  // 0: off.
  float attn_temperature_scale = 0.0f;
  int64_t attn_temperature_floor = 0;
  std::vector<LayerConfig> layers;  // [n_layer]
  MoeConfig moe;                    // the Ffn::kMoe layers' experts (n_expert 0: none)

  // Recurrent mixers; zero for dense models. Both kinds convolve C =
  // ssm_conv_channels() channels over ssm_d_conv taps and keep a state of
  // ssm_d_state * ssm_d_inner floats per layer.
  //   Mamba2 (nemotron_h): d_inner = n_head * head dim; n_group groups of B/C
  //     with d_state each; channels = x | B | C.
  //   DeltaNet (qwen35): n_group key heads of d_state dims (q and k), n_head
  //     value heads of d_inner / n_head dims; channels = q | k | v; state per
  //     value head [d_state key dims][value head dim].
  int64_t ssm_d_conv = 0;
  int64_t ssm_d_inner = 0;
  int64_t ssm_d_state = 0;
  int64_t ssm_n_head = 0;
  int64_t ssm_n_group = 0;
  int64_t ssm_conv_channels() const { return ssm_d_inner + 2 * ssm_n_group * ssm_d_state; }
  // Draft (multi-token prediction) blocks at the end of the file that the
  // normal forward pass skips (qwen35 nextn_predict_layers).
  int64_t n_nextn_layers = 0;

  int64_t n_attention_layers() const;
  int64_t n_recurrent_layers() const;

  // Reads and validates the hyperparameters. Errors name the key and the
  // expected vs. actual value: unknown architecture -> NotSupported.
  static Result<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace mx::models
