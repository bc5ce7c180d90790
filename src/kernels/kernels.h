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

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace mx::kernels {

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

// y[t * ldy + r] = sum_k W[r, k] * x[t * ldx + k] for t < n_tokens, r < n_rows.
// Activations stay f32 (no activation rounding): the result equals an f32
// computation with the dequantized weights up to summation order.
// REQUIRES: WeightTypeSupported(w.type); x, y do not overlap; pool may be null
// (runs on the caller).
void MatMul(const Matrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, ThreadPool* pool);

// Converts n values (n a multiple of the block size) of `type` to f32.
void DequantizeRow(DType type, const uint8_t* src, float* dst, int64_t n);
// Converts n f32 values to `type` (F32, F16, BF16, Q8_0; a simple
// round-to-nearest quantizer for quantized types). Used by make-model.
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
};
// Rotates every head of x ([n_heads, head_dim], head_dim contiguous) by
// position `pos` as llama.cpp does (ENGINE-FACTS §5): angles built iteratively
// in f32. Dims >= n_rot are unchanged. A negative or positive pos also serves
// to re-rotate cached keys by a position delta.
void Rope(float* x, int n_heads, int head_dim, const RopeParams& p, int64_t pos);

// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
// x[i] = max(x[i], 0)^2.
void ReluSquared(float* x, int64_t n);
// x[i] = silu(x[i]).
void Silu(float* x, int64_t n);
// y[i] += x[i].
void Add(const float* x, int64_t n, float* y);

// KV rows of one attention layer for one sequence: row p holds the keys
// (values) of position p for all kv heads, [n_kv_head, head_dim] contiguous.
struct KvView {
  DType type = DType::kF16;    // F16 or F32
  const uint8_t* k = nullptr;  // row p at k + p * row_bytes
  const uint8_t* v = nullptr;
  size_t row_bytes = 0;
  int n_kv_head = 0;
  int head_dim = 0;
};

// Causal attention of one query token over KV rows [0, n_pos):
// for head h (kv head h / (n_head / n_kv_head)):
//   out[h] = sum_p softmax_p(scale * q[h] . k_p) * v_p.
// q: [n_head, head_dim] f32; out: [n_head, head_dim] f32; scratch: >= n_pos
// floats. Single-threaded; the caller parallelises over tokens and heads.
void AttentionRow(const float* q, int n_head, const KvView& kv, int64_t n_pos, float scale,
                  float* out, float* scratch);

// Writes n f32 values to a KV row of `type` (F16 rounds to nearest even).
void StoreKvRow(DType type, const float* src, int64_t n, uint8_t* dst);
// Reads n values of a KV row of `type` into f32.
void LoadKvRow(DType type, const uint8_t* src, int64_t n, float* dst);

}  // namespace mx::kernels
