// Internal: the integer path for K-quant weights (Q4_K, Q5_K, Q6_K) in plain
// C++. Activations are quantized per token to Q8KBlocks (isa.h); one block of
// 256 weights and one activation block give two exact integer sums, and an
// output element is then
//
//   acc = 0
//   for every block b, in order:
//     acc = fma(a_b.d * d_b, (float)S_b, acc)          // all types
//     acc = fma(-(a_b.d * dmin_b), (float)M_b, acc)    // Q4_K, Q5_K only
//
// with, for Q4_K / Q5_K, S = sum_j sc_j * sum_{i in sub-block j} q_i a_i and
// M = sum_j m_j * (sum of a over sub-block j); for Q6_K (q stored unsigned,
// value q - 32) S = sum_j sc_j * sum_{i in j} q_i a_i - 32 * sum_j sc_j *
// (sum of a over j). The integer sums are exact, so every path (this file
// compiled as the scalar reference, its AVX2 copy, the AVX-512 kernels in
// qmatmul_avx512.cc) gives the same bits, whatever the tiling.
//
// QDotRow / QDotRow32 hand the low-bit types (Q2_K, Q3_K, the IQ types, ...)
// to lowbit_blocks.h, whose per-block steps have the same form.
//
// Everything is in an anonymous namespace (see dequant_blocks.h / isa.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/dequant_blocks.h"
#include "kernels/isa.h"

namespace mx::kernels::internal {
namespace {

// Q4_K (kFive false) / Q5_K integer sums of one block against one activation
// block. q: the block's 4/5-bit values (unsigned).
template <bool kFive>
inline void QxKSums(const uint8_t* __restrict b, const Q8KBlock& __restrict a, int32_t* s,
                    int32_t* m) {
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFive ? 48 : 16);
  int32_t sum = 0, mins = 0;
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    KScaleMin(2 * c, scales, &sc0, &m0);
    KScaleMin(2 * c + 1, scales, &sc1, &m1);
    const uint8_t* q = qs + 32 * c;
    const int8_t* x = a.q + 64 * c;
    int32_t p0 = 0, p1 = 0;
    for (int l = 0; l < 32; ++l) {
      const int hi0 = kFive ? ((qh[l] >> (2 * c)) & 1) << 4 : 0;
      const int hi1 = kFive ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0;
      p0 += ((q[l] & 0xF) + hi0) * x[l];
      p1 += ((q[l] >> 4) + hi1) * x[32 + l];
    }
    sum += sc0 * p0 + sc1 * p1;
    mins +=
        m0 * (a.bsums[4 * c] + a.bsums[4 * c + 1]) + m1 * (a.bsums[4 * c + 2] + a.bsums[4 * c + 3]);
  }
  *s = sum;
  *m = mins;
}

// Q6_K integer sum of one block (the -32 offset folded in exactly).
inline int32_t Q6KSum(const uint8_t* __restrict b, const Q8KBlock& __restrict a) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  int32_t sum = 0, offset = 0;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b + 64 * n;
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* x = a.q + 128 * n;
    // Quarter k of this 128 holds values 32k + l (l < 32), scales 8n + 2k + l / 16.
    int32_t p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int l = 0; l < 32; ++l) {
      const int h = l / 16;
      p[0 + h] += ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) * x[l];
      p[2 + h] += ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) * x[l + 32];
      p[4 + h] += ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) * x[l + 64];
      p[6 + h] += ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) * x[l + 96];
    }
    for (int j = 0; j < 8; ++j) {
      sum += sc[8 * n + j] * p[j];
      offset += sc[8 * n + j] * a.bsums[8 * n + j];
    }
  }
  return sum - 32 * offset;
}

// One output element: row (n_blocks blocks of ggml type id `type_id`)
// against one token's activation blocks, in the order of the file comment.
template <class Cvt>
float QDotRow(uint32_t type_id, const uint8_t* row, const Q8KBlock* a, int64_t n_blocks) {
  if (LowbitLayoutFor(type_id).kind == 256) return LowbitDotRow256<Cvt>(type_id, row, a, n_blocks);
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    if (type_id == 14) {  // Q6_K
      const uint8_t* b = row + ib * 210;
      const float d = Cvt::Half(b + 208);
      acc = __builtin_fmaf(a[ib].d * d, static_cast<float>(Q6KSum(b, a[ib])), acc);
      continue;
    }
    const bool five = type_id == 13;
    const uint8_t* b = row + ib * (five ? 176 : 144);
    int32_t s, m;
    if (five) {
      QxKSums<true>(b, a[ib], &s, &m);
    } else {
      QxKSums<false>(b, a[ib], &s, &m);
    }
    const float d = Cvt::Half(b), dmin = Cvt::Half(b + 2);
    acc = __builtin_fmaf(a[ib].d * d, static_cast<float>(s), acc);
    acc = __builtin_fmaf(-(a[ib].d * dmin), static_cast<float>(m), acc);
  }
  return acc;
}

// ------------------------------------------------- 32-value block types
//
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 against Q8Block32 activations. A block's
// values are u - o with u unsigned (Q8_0: q + 128, o = 128; Q4_0: o = 8;
// Q5_0: o = 16; Q4_1 / Q5_1: o = 0 and a min m), so per block
//   S = sum u_i a_i - o * sum a_i                       (exact)
//   acc = fma(a.d * d, (float)S, acc)
//   acc = fma(a.d * m, (float)sum a_i, acc)             (Q4_1, Q5_1 only)

struct Block32 {
  uint8_t u[32];
  int o;
  float d, m;
};

// Geometry and offset of a 32-value type (ggml type id); bytes 0 if not one.
struct Layout32 {
  int bytes, o;
  bool has_min;
};
inline Layout32 Layout32For(uint32_t type_id) {
  switch (type_id) {
    case 8:
      return {34, 128, false};  // Q8_0
    case 2:
      return {18, 8, false};  // Q4_0
    case 3:
      return {20, 0, true};  // Q4_1
    case 6:
      return {22, 16, false};  // Q5_0
    case 7:
      return {24, 0, true};  // Q5_1
    default:
      return {0, 0, false};
  }
}

template <class Cvt>
inline Block32 Unpack32(uint32_t type_id, const uint8_t* b) {
  Block32 w;
  w.o = Layout32For(type_id).o;
  w.d = Cvt::Half(b);
  w.m = 0.0f;
  if (type_id == 8) {
    for (int i = 0; i < 32; ++i) w.u[i] = static_cast<uint8_t>(b[2 + i] ^ 0x80);
    return w;
  }
  const bool has_min = type_id == 3 || type_id == 7, five = type_id == 6 || type_id == 7;
  if (has_min) w.m = Cvt::Half(b + 2);
  uint32_t qh = 0;
  if (five) std::memcpy(&qh, b + (has_min ? 4 : 2), 4);
  const uint8_t* qs = b + (five ? (has_min ? 8 : 6) : (has_min ? 4 : 2));
  for (int i = 0; i < 16; ++i) {
    w.u[i] = static_cast<uint8_t>((qs[i] & 0xF) | (((qh >> i) & 1u) << 4));
    w.u[i + 16] = static_cast<uint8_t>((qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4));
  }
  return w;
}

template <class Cvt>
float QDotRow32(uint32_t type_id, const uint8_t* row, const Q8Block32* a, int64_t n_blocks) {
  if (LowbitLayoutFor(type_id).kind == 32) return LowbitDotRow32<Cvt>(type_id, row, a, n_blocks);
  const Layout32 l = Layout32For(type_id);
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    const Block32 w = Unpack32<Cvt>(type_id, row + ib * l.bytes);
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += w.u[i] * a[ib].q[i];
    s -= w.o * a[ib].sum;
    acc = __builtin_fmaf(a[ib].d * w.d, static_cast<float>(s), acc);
    if (l.has_min) acc = __builtin_fmaf(a[ib].d * w.m, static_cast<float>(a[ib].sum), acc);
  }
  return acc;
}

// isa.h QGemmFn / QGemm32Fn in plain C++: every (row, token) by its row dot
// (QDotRow<Cvt> for Q8KBlock activations, QDotRow32<Cvt> for Q8Block32).
template <class Act, float (*kRowDot)(uint32_t, const uint8_t*, const Act*, int64_t)>
void QGemmPortable(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                   const Act* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  const uint32_t type_id = static_cast<uint32_t>(type);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      y[t * ldy + r] =
          kRowDot(type_id, w + static_cast<size_t>(r) * row_bytes, a + t * lda, n_blocks);
    }
  }
}

}  // namespace
}  // namespace mx::kernels::internal
