// Internal: the per-instruction-set function table behind kernels.h, and the
// scalar reference routines every path falls back to.
//
// Each SIMD path lives in its own files compiled with their own -m flags
// (matmul_avx2.cc + ops_avx2.cc, matmul_avx512.cc + ops_avx512.cc). Those
// files keep every helper at internal linkage and use no std:: templates, so
// no inline function compiled with AVX-512 can be picked by the linker for a
// caller on another path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace mx::kernels::internal {

// y[t * ldy + r] = dot(row r of w, x[t * ldx ...]) for r < n_rows, t < n_tokens.
// Rows of `type` start at w + r * row_bytes. Each output element is one
// accumulator over n_cols in the path's fixed order, so the value never
// depends on n_rows, n_tokens or how the caller split the work.
// Returns false (computing nothing) when the path has no direct kernel for
// `type`; every path handles kF32.
using GemmFn = bool (*)(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                        int64_t n_cols, const float* x, int64_t ldx, int64_t n_tokens, float* y,
                        int64_t ldy);
// Activations of the integer path for K-quant weights (kernels.h MatMul):
// 256 values of one token quantized as llama.cpp's Q8_K does (d = 1 /
// (-127 / x_m), x_m the first value of largest magnitude; q = min(127,
// round-to-nearest-even(x * -127 / x_m))), plus the sums of each 16 q.
struct alignas(64) Q8KBlock {
  int8_t q[256];
  int16_t bsums[16];
  float d;
};
inline constexpr int64_t kQ8KValues = 256;
// y[t * ldy + r] = the qdot_blocks.h dot of row r (n_blocks blocks of `type`
// at w + r * row_bytes) with token t's blocks a[t * lda, t * lda + n_blocks),
// for r < n_rows, t < n_tokens. REQUIRES: type is Q4_K, Q5_K or Q6_K.
using QGemmFn = void (*)(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                         int64_t n_blocks, const Q8KBlock* a, int64_t lda, int64_t n_tokens,
                         float* y, int64_t ldy);
// Quantizes n values (a multiple of 256) into n / 256 blocks; every path
// writes the same bytes as QuantizeQ8KRef.
using QuantizeQ8KFn = void (*)(const float* x, int64_t n, Q8KBlock* out);

// Activations of the integer path for the 32-value block types (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1; kernels.h MatMul): 32 values of one token rounded as
// llama.cpp's x86 quantize_row_q8_0 does (a = max |x|, d = a / 127 kept as
// fp16, q = round-to-nearest-even(x * (127 / a))), plus the sum of the q.
struct Q8Block32 {
  int8_t q[32];
  float d;  // the fp16 value, widened
  int32_t sum;
};
inline constexpr int64_t kQ8Block32Values = 32;
// As QGemmFn for the 32-value block types (qdot_blocks.h QDotRow32).
using QGemm32Fn = void (*)(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                           int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens,
                           float* y, int64_t ldy);
// Quantizes n values (a multiple of 32); every path writes the same bytes.
using Quantize32Fn = void (*)(const float* x, int64_t n, Q8Block32* out);

// Dequantizes n values; false when the path leaves `type` to the reference.
using DequantFn = bool (*)(DType type, const uint8_t* src, float* dst, int64_t n);

struct IsaOps {
  Isa isa;
  GemmFn gemm;
  // The most tokens per call for which the driver runs `gemm` on the stored
  // weights of `type` (0: never, convert to f32 panels first). Above it, each
  // row block is converted (F32: copied, 64-byte aligned) once per task and
  // reused by all the task's tokens. Either way the per-element arithmetic is
  // the same; this only picks the faster route.
  int64_t (*direct_max_tokens)(DType type);
  DequantFn dequant_row;
  QGemmFn qgemm;
  QuantizeQ8KFn quantize_q8k;
  QGemm32Fn qgemm32;
  Quantize32Fn quantize_q8_32;
  void (*f32_to_f16)(const float* src, int64_t n, uint16_t* dst);  // RNE
  void (*f16_to_f32)(const uint16_t* src, int64_t n, float* dst);
  // Sum over i of (double)(x[i] * x[i]) (the f32 square, summed in double).
  double (*sum_squares)(const float* x, int64_t n);
  // out[i] = (x[i] * scale) * w[i], or x[i] * scale when w is null.
  void (*scale_mul)(const float* x, const float* w, float scale, int64_t n, float* out);
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out);
  // Sum over i of exp(x[i] - shift) in double, NaN terms left out, and the
  // largest x[i] (NaN left out; -inf when none): kernels.h LogSumExp's parts.
  double (*sum_exp)(const float* x, int64_t n, float shift);
  float (*max_value)(const float* x, int64_t n);
  void (*silu)(float* x, int64_t n);
  // kernels.h AttentionRows (AttentionRow is the n_q = 1 case).
  void (*attention_rows)(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                         const int64_t* n_pos, float scale, float* out, int64_t ldo,
                         float* scratch);
  // kernels.h AttentionScores / AttentionFromScores; null on paths without
  // them (the caller then runs attention_rows).
  void (*attention_scores)(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                           const int64_t* n_pos, int64_t p0, int64_t p1, float scale, float* s,
                           int64_t lds);
  void (*attention_from_scores)(int64_t n_q, int n_head, const KvView& kv, const int64_t* n_pos,
                                int kv0, int kv1, float* s, int64_t lds, float* out, int64_t ldo);
  // kernels.h DeltaRule.
  void (*delta_rule)(float* s, const float* k, const float* v, const float* q, float decay,
                     float beta, int64_t d_k, int64_t d_v, float* delta, float* out);
  // BF16 weights on a path with a tile unit (null elsewhere: BF16 then runs
  // `gemm` on f32 activations). pack_bf16 rounds n_tokens rows of x to bf16
  // (RNE) into groups of kBf16GroupTokens tokens (missing tokens and columns
  // zero), each group ceil(n_cols / 32) Bf16Chunks; bgemm computes y as
  // GemmFn does from the stored rows and packed activations (xp: the first
  // token's group). Every output element is the same sequence of tile
  // products for any n_rows, n_tokens or split.
  void (*pack_bf16)(const float* x, int64_t ldx, int64_t n_tokens, int64_t n_cols, uint16_t* out);
  void (*bgemm)(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                const uint16_t* xp, int64_t n_tokens, float* y, int64_t ldy);
};
// One packed (token group, 32 columns) unit of pack_bf16: row kk holds each
// token's columns 2 kk and 2 kk + 1.
inline constexpr int64_t kBf16GroupTokens = 16;
inline constexpr int64_t kBf16ChunkValues = 32;  // columns per Bf16Chunk
struct alignas(64) Bf16Chunk {
  uint16_t v[512];
};

const IsaOps& ScalarOps();
const IsaOps& Avx2Ops();    // only call when the CPU has AVX2 + FMA + F16C
const IsaOps& Avx512Ops();  // only call when the CPU has AVX-512 F/BW/VL/DQ/VNNI
const IsaOps& AmxOps();     // ... and AVX512_BF16, AMX-TILE, AMX-BF16, granted by the OS
// The active table (see kernels.h ActiveIsa).
const IsaOps& Ops();

// Scalar reference conversions (quant.cc): every type kernels.h supports.
bool DequantizeRowRef(DType type, const uint8_t* src, float* dst, int64_t n);
bool QuantizeRowRef(DType type, const float* src, uint8_t* dst, int64_t n);
bool DequantizeSupportedRef(DType type);
void QuantizeQ8KRef(const float* x, int64_t n, Q8KBlock* out);
void QuantizeQ8_32Ref(const float* x, int64_t n, Q8Block32* out);
bool QuantizeSupportedRef(DType type);
// One block's quantizer (make-model): lowbit_quant.cc's for the low-bit
// types that have one, else null.
using BlockQuantFn = void (*)(const float* x, uint8_t* block);
BlockQuantFn LowbitQuantFor(DType type);
// Q8_0 / Q4_0 KV rows rounded as kernels.h StoreKvRow states; false (nothing
// written) for other types or n not a multiple of 32.
bool QuantizeKvRowRef(DType type, const float* src, uint8_t* dst, int64_t n);

// The SIMD gemms (matmul_avx2.cc, matmul_avx512.cc).
bool GemmAvx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
              const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy);
bool GemmAvx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy);
void QGemmAvx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
               const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy);
void QGemmAvx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                 int64_t n_blocks, const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y,
                 int64_t ldy);
void QuantizeQ8KAvx512(const float* x, int64_t n, Q8KBlock* out);
void QGemm32Avx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                 int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y,
                 int64_t ldy);
void QGemm32Avx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                   int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y,
                   int64_t ldy);
void QuantizeQ8_32Avx512(const float* x, int64_t n, Q8Block32* out);
// The low-bit types' integer kernels (lowbit_blocks.h; qmatmul_lowbit_avx2.cc,
// qmatmul_lowbit_avx512.cc): QGemmFn for the Q8_K kind, QGemm32Fn for the
// Q8_0 kind. They compute nothing for other types.
void LowbitQGemmAvx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                     int64_t n_blocks, const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y,
                     int64_t ldy);
void LowbitQGemm32Avx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                       int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens,
                       float* y, int64_t ldy);
void LowbitQGemmAvx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                       int64_t n_blocks, const Q8KBlock* a, int64_t lda, int64_t n_tokens,
                       float* y, int64_t ldy);
void LowbitQGemm32Avx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                         int64_t n_blocks, const Q8Block32* a, int64_t lda, int64_t n_tokens,
                         float* y, int64_t ldy);
// The AVX-512 attention (attention_avx512.cc); AttentionSplitFits is
// kernels.h's, for that path.
void AttentionRowsAvx512(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                         const int64_t* n_pos, float scale, float* out, int64_t ldo,
                         float* scratch);
void AttentionScoresAvx512(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                           const int64_t* n_pos, int64_t p0, int64_t p1, float scale, float* s,
                           int64_t lds);
void AttentionFromScoresAvx512(int64_t n_q, int n_head, const KvView& kv, const int64_t* n_pos,
                               int kv0, int kv1, float* s, int64_t lds, float* out, int64_t ldo);
bool AttentionSplitFits(int64_t n_q, int n_head, const KvView& kv);
// The amx path's BF16 kernels (matmul_amx.cc).
void PackBf16Amx(const float* x, int64_t ldx, int64_t n_tokens, int64_t n_cols, uint16_t* out);
void BGemmAmx(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
              const uint16_t* xp, int64_t n_tokens, float* y, int64_t ldy);
bool DequantAvx2(DType type, const uint8_t* src, float* dst, int64_t n);
bool DequantAvx512(DType type, const uint8_t* src, float* dst, int64_t n);

}  // namespace mx::kernels::internal
