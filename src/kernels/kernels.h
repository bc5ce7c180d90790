// Compute kernels of the engine. Every kernel has a scalar reference and
// SIMD paths (AVX2, AVX-512) chosen at run time; tests hold each path against
// the reference.
//
// Batch invariance (SPEC §2): for every kernel here, the value computed for
// one token depends only on that token's inputs and the weights, never on how
// many tokens are in the call, how they are tiled, the thread count or which
// thread ran which part. Each output element is reduced in one fixed order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace mx::kernels {

// Instruction-set paths. The best one this CPU supports is chosen at first
// use; MATRICXON_KERNELS=scalar|avx2|avx512|amx (read once, at that moment)
// forces one. A forced path the CPU lacks falls back to the best available
// (with a warning line). Results are bit-identical run to run within a path;
// across paths they agree to within summation-order error (and, for BF16
// weights on amx, the rounding of the activations, see MatMul). amx is
// avx512 with BF16 weights multiplied on the AMX tile unit.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

// "scalar", "avx2", "avx512", "amx".
const char* IsaName(Isa isa);
// Parses an IsaName() string; false when unknown.
bool IsaFromName(std::string_view name, Isa* isa);
// The path a MATRICXON_KERNELS value selects on this CPU: the named one if
// the CPU has it, else (empty, unknown or unavailable) the best available.
Isa IsaForSetting(std::string_view setting);
// Paths this CPU can run, scalar first, best last.
std::vector<Isa> AvailableIsas();
// The path kernels run on now.
Isa ActiveIsa();
// Forces a path (tests, benchmarks). Returns false and changes nothing when
// the CPU lacks it. REQUIRES: no kernel is running concurrently.
bool SetActiveIsa(Isa isa);

// A 2-D weight matrix: n_rows rows of n_cols values stored in `type`'s blocks,
// row r starting at data + r * row_bytes. (GGUF shape [n_cols, n_rows].)
struct Matrix {
  DType type = DType::kF32;
  const uint8_t* data = nullptr;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  size_t row_bytes = 0;
};

// True when MatMul and DequantizeRow handle weights of this type.
bool WeightTypeSupported(DType type);
// True when MatMul on the active path rounds BF16 weights' activations to
// bf16 (the amx path; see MatMul).
bool Bf16ActivationsRounded();
// The alignment (bytes, of data and row_bytes) at which MatMul on the active
// path reads rows of `type` at full speed; 1 when any is as fast. BF16 on
// amx: 64 (a tile row that straddles two cache lines costs two loads; rows
// not so aligned are copied block by block on every call).
size_t FastRowAlignment(DType type);

// y[t * ldy + r] = sum_k W[r, k] * x[t * ldx + k] for t < n_tokens, r < n_rows.
// F32, F16, BF16: activations stay f32, the result equals an f32 computation
// up to summation order; except BF16 on the amx path, whose activations are
// rounded to bf16 (round to nearest even, as llama.cpp's CPU backend rounds
// them for BF16 weights) and whose products (exact) are summed by the tile
// unit in f32 (bf16 denormals read as zero). Quantized weights read their activations rounded as
// llama.cpp's CPU backend rounds them: per token, Q8_K blocks (256 values,
// one f32 scale, int8) for the 256-value types (Q2_K ... Q6_K, the IQ types
// but IQ4_NL, TQ1_0, TQ2_0) and Q8_0 blocks (32 values, an fp16 scale) for
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, NVFP4, Q1_0, Q2_0. Block dot
// products are exact integers and each output element combines them in one
// fixed f32 order (kernels/qdot_blocks.h, lowbit_blocks.h) that every path
// computes bit for bit.
// REQUIRES: WeightTypeSupported(w.type); x, y do not overlap; pool may be null
// (runs on the caller).
void MatMul(const Matrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, ThreadPool* pool);

// One product of MatMuls: y = W x as in MatMul.
struct MatMulJob {
  Matrix w;
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t n_tokens = 0;
  float* y = nullptr;
  int64_t ldy = 0;
};
inline constexpr size_t kMaxMatMulJobs = 32;
// Several independent products (e.g. Q, K, V of one layer) in one parallel
// region (up to kMaxMatMulJobs at a time), so the threads meet once instead
// of once per product. Each job's results are exactly MatMul's. REQUIRES: no
// job's y overlaps another job's x or y.
void MatMuls(std::span<const MatMulJob> jobs, ThreadPool* pool);

// Converts n values (n a multiple of the block size) of `type` to f32.
void DequantizeRow(DType type, const uint8_t* src, float* dst, int64_t n);
// Converts n f32 values to `type` (F32, F16, BF16, Q8_0; a simple
// round-to-nearest quantizer for quantized types, ggml's rule for TQ1_0,
// TQ2_0, Q1_0, Q2_0, MXFP4; none for the IQ1/IQ2/IQ3 grid types and NVFP4:
// see QuantizeSupported). Used by make-model.
void QuantizeRow(DType type, const float* src, uint8_t* dst, int64_t n);
// True when QuantizeRow can write this type.
bool QuantizeSupported(DType type);

// out = x / sqrt(mean(x^2) + eps) * w (w may be null: no weight). out may alias x.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out);

enum class RopeMode { kNormal = 0, kNeox = 2 };
struct RopeParams {
  int n_rot = 0;            // rotated dims per head (even)
  float freq_base = 10000;  // theta
  float freq_scale = 1.0f;  // 1 / linear scaling factor
  RopeMode mode = RopeMode::kNormal;
  // YaRN and frequency factors (llama.cpp rope_yarn); the defaults turn them off.
  float ext_factor = 0.0f;   // YaRN extrapolation mix (0 = off)
  float attn_factor = 1.0f;  // multiplies cos and sin
  float beta_fast = 32.0f;   // YaRN correction range
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;                   // training context (YaRN only)
  const float* freq_factors = nullptr;  // [n_rot / 2] divisors of theta, or null
  // Leaves cos and sin unscaled (no attn_factor, no YaRN magnitude scale):
  // re-rotating keys that carry the scale already (a context shift).
  bool rotation_only = false;
};
// Rotates every head of x ([n_heads, head_dim], head_dim contiguous) by
// position `pos` as llama.cpp does (ENGINE-FACTS §5): angles built iteratively
// in f32; pair i's angle pos * base^(-2i/n_rot) / freq_factors[i], blended
// with its linear interpolation by YaRN's ramp when ext_factor != 0; cos and
// sin times attn_factor (and YaRN's 1 + 0.1 ln(1/freq_scale)). Dims >= n_rot
// are unchanged. A negative or positive pos also serves
// to re-rotate cached keys by a position delta.
void Rope(float* x, int n_heads, int head_dim, const RopeParams& p, int64_t pos);

// A row's position for multi-section RoPE: time, height, width and a fourth
// component (llama.cpp's (t, h, w, e)). Text rows have t = h = w = their
// position and e = 0; image rows of Qwen-VL models share t and differ in h, w.
struct RopePos {
  int64_t t = 0, h = 0, w = 0, e = 0;
  static RopePos Text(int64_t pos) { return {pos, pos, pos, 0}; }
  bool operator==(const RopePos&) const = default;
};
// Interleaved multi-section RoPE (llama.cpp's IMRoPE, rope type 40: Qwen3-VL,
// Qwen 3.5). NeoX pairs (i, i + n_rot/2) of the first n_rot dims; pair i
// takes sector s = i mod (sections[0] + ... + sections[3]) and rotates by the
// h component when s % 3 == 1 and s < 3 * sections[1], w when s % 3 == 2 and
// s < 3 * sections[2], t when s % 3 == 0 and s < 3 * sections[0], else e,
// times freq_base^(-2i/n_rot) (each component's angle built iteratively in
// f32 as Rope builds its one). For a text row (RopePos::Text(pos)) this is
// bit for bit Rope(pos) in NeoX mode. REQUIRES p.mode == kNeox, sections sum > 0.
void RopeMulti(float* x, int n_heads, int head_dim, const RopeParams& p, const int sections[4],
               const RopePos& pos);

// log(sum over i of exp(x[i])), NaN terms left out: -inf when no term is above
// -inf, +inf when one is +inf. Computed as max + log(sum of exp(x[i] - max))
// with the terms summed in double; the vector paths compute the exponentials
// in f32 (relative error ~1e-7 each), the scalar path in double. A softmax's
// normaliser, for logprobs.
double LogSumExp(const float* x, int64_t n);
// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
// x[i] = max(x[i], 0)^2.
void ReluSquared(float* x, int64_t n);
// gpt-oss's clamped SwiGLU as llama.cpp's swiglu_oai computes it:
// g = min(gate, 7), u = clamp(up, -7, 7), out = g / (1 + exp(-1.702 g)) * (u + 1).
// out may alias gate.
void SwiGluClamped(const float* gate, const float* up, int64_t n, float* out);
// out[i] = gelu(gate[i]) * up[i] with the tanh GELU
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated as llama.cpp's
// CPU backend does, through a float16 table: f16(gelu(f16(x))) for
// -10 < x < 10, x for x >= 10, 0 for x <= -10 (gemma3). out may alias gate.
// The same bits on every path.
void GeGluF16Table(const float* gate, const float* up, int64_t n, float* out);
// x[i] = silu(x[i]).
void Silu(float* x, int64_t n);
// y[i] += x[i].
void Add(const float* x, int64_t n, float* y);

// KV row types (MATRICXON_KV_TYPE): F16 (default), F32, and llama.cpp's
// Q8_0 and Q4_0 blocks (32 values per block: 34 and 18 bytes). K and V may
// differ. A quantized row holds whole blocks per head, so heads of a
// quantized K or V must be multiples of kKvBlockValues wide.
inline constexpr int kKvBlockValues = 32;
// True for the four KV row types.
bool KvTypeSupported(DType type);
// Bytes of one head's slice of a KV row (also the offset of kv head h + 1
// from kv head h); 0 when head_dim does not fit the type's blocks.
size_t KvHeadBytes(DType type, int64_t head_dim);

// KV rows of one attention layer for one sequence: row p holds the keys
// (values) of position p for all kv heads, [n_kv_head, head_dim] contiguous,
// each head's slice KvHeadBytes(type, head_dim) bytes.
struct KvView {
  DType k_type = DType::kF16;  // any KvTypeSupported type
  DType v_type = DType::kF16;
  const uint8_t* k = nullptr;  // row p at k + p * k_row_bytes
  const uint8_t* v = nullptr;  // row p at v + p * v_row_bytes
  size_t k_row_bytes = 0;
  size_t v_row_bytes = 0;
  int n_kv_head = 0;
  int head_dim = 0;  // a multiple of kKvBlockValues when K or V is quantized
};

// Causal attention of one query token over KV rows [0, n_pos):
// for head h (kv head h / (n_head / n_kv_head)):
//   out[h] = sum_p softmax_p(scale * q[h] . k_p) * v_p.
// Quantized K and V rows are read as they are stored: each block is widened
// to f32 in registers (or a small per-thread panel of a few rows) as the
// kernel reaches it; d * q is exact in f32, so the arithmetic is the F16 /
// F32 kernels' on the dequantized values, in the same fixed order.
// q: [n_head, head_dim] f32; out: [n_head, head_dim] f32; scratch: >=
// AttentionScratchFloats(n_pos, head_dim) floats. Single-threaded; the caller
// parallelises over tokens and heads.
void AttentionRow(const float* q, int n_head, const KvView& kv, int64_t n_pos, float scale,
                  float* out, float* scratch);

// Query tokens per tile in the AVX2 AttentionRows.
inline constexpr int kAttentionQueryTile = 4;
// (query token, head) rows that share one pass over a kv head's K/V rows in
// the AVX-512 AttentionRows; the scratch is sized by it.
inline constexpr int kAttentionRowTile = 32;
// Scratch floats AttentionRow / AttentionRows need for queries attending to
// at most max_pos positions with heads of head_dim values.
inline constexpr int64_t AttentionScratchFloats(int64_t max_pos, int64_t head_dim) {
  const int64_t pos16 = (max_pos + 15) / 16 * 16, dim16 = (head_dim + 15) / 16 * 16;
  return kAttentionRowTile * (pos16 + 2 * dim16) + 64 * dim16;
}

// Attention of n_q query tokens of one sequence at once (prompt reading):
// query i ([n_head, head_dim] at q + i * ldq) attends to KV rows
// [0, n_pos[i]) and writes [n_head, head_dim] at out + i * ldo. Each query's
// output is bit-identical to AttentionRow for that query alone, and to a call
// per head with a one-head view: batching only shares the K/V row loads
// between the queries and the heads that read the same kv head.
// scratch: >= AttentionScratchFloats(max_i n_pos[i], head_dim) floats.
// Single-threaded; the caller parallelises over query blocks and kv heads.
void AttentionRows(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                   const int64_t* n_pos, float scale, float* out, int64_t ldo, float* scratch);

// Generation over long contexts in two phases that the caller can spread
// over threads by position range, then by kv head, so that every thread reads
// whole K rows (all kv heads of a position) rather than one kv head's slice of
// each. For queries of one batch tile as AttentionRows takes them (n_q queries
// of [n_head, head_dim] at q + i * ldq, query i over rows [0, n_pos[i])):
//   AttentionScores writes the scaled scores of positions [p0, p1) for every
//     head to s[(i * n_head + h) * lds + p] (and may write zeros up to the
//     next multiple of 16 past the last position). p0 is a multiple of 16 and
//     p1 a multiple of 16 or >= max n_pos[i]; lds >= max n_pos[i] rounded up
//     to 16.
//   AttentionFromScores, once every position's scores are there, writes the
//     output of the heads of kv heads [kv0, kv1) as AttentionRows does (the
//     scores are overwritten).
// The output is bit-identical to AttentionRows's. Only where
// AttentionSplitAvailable(n_q, n_head, kv) holds (the active path has the
// phases and the tile is few rows per kv head); never call them otherwise.
bool AttentionSplitAvailable(int64_t n_q, int n_head, const KvView& kv);
void AttentionScores(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                     const int64_t* n_pos, int64_t p0, int64_t p1, float scale, float* s,
                     int64_t lds);
void AttentionFromScores(int64_t n_q, int n_head, const KvView& kv, const int64_t* n_pos, int kv0,
                         int kv1, float* s, int64_t lds, float* out, int64_t ldo);

// One token of the gated delta rule for one value head (Gated DeltaNet):
//   S = decay * S;  delta = beta * (v - S^T k);  S = S + k delta^T;  out = S^T q
// S: [d_k][d_v] row-major (row = key dim); k, q: [d_k]; v, out: [d_v];
// delta: [d_v] scratch. Each column of S^T k and S^T q is summed over the
// key dims in order 0..d_k-1, so a token's result depends only on its inputs
// and S. Single-threaded; the caller parallelises over heads.
void DeltaRule(float* s, const float* k, const float* v, const float* q, float decay, float beta,
               int64_t d_k, int64_t d_v, float* delta, float* out);
// Writes n f32 values to a KV row of `type`, rounded as llama.cpp's CPU
// backend writes its KV cache (ggml set_rows): F16 to nearest even; Q8_0 as
// its x86 quantize_row_q8_0 (a = max |x| of the block, d = fp16(a / 127),
// q = x * (127 / a) rounded to nearest even); Q4_0 as quantize_row_q4_0_ref
// (m = the first value of largest magnitude, d = m / -8, q = min(15,
// trunc(x / d + 8.5))); F32 copies. The same bytes on every path.
// REQUIRES: KvTypeSupported(type); n a multiple of 32 for Q8_0 / Q4_0.
void StoreKvRow(DType type, const float* src, int64_t n, uint8_t* dst);
// Reads n values of a KV row of `type` into f32 (exact).
void LoadKvRow(DType type, const uint8_t* src, int64_t n, float* dst);

}  // namespace mx::kernels
