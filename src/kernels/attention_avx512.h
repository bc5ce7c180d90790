// Internal: what the AVX-512 attention kernels share (attention_avx512.cc:
// AttentionRows; attention_split_avx512.cc: the two phases of long-context
// generation): the per-row arithmetic every layout follows, row sets, and the
// few-row layout. Include only from files compiled with the AVX-512 flags
// (internal linkage).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/isa.h"
#include "kernels/simd_avx512.h"

namespace mx::kernels::internal {
namespace {

using avx512::FirstLanes;
using avx512::HMax;
using avx512::HSum;

// ------------------------------------------------------------- attention
//
// Rows are (query token, head) pairs; all rows of a call that read the same kv
// head are processed together, up to kAttentionRowTile at a time (a "set").
// Per row the arithmetic is fixed, whatever the set:
//   score_p = (one FMA chain over d = 0..head_dim-1 of q[d] * k_p[d]) * scale
//   m       = max over p < n_pos of score_p
//   e_p     = Exp(score_p - m)
//   sum     = 16 partial sums (partial l: e_p for p = l mod 16, p in order)
//             folded by the HSum tree (l + l+8, + l+4, + l+2, + l+1)
//   out[d]  = (one FMA chain over p in order of e_p * v_p[d]) * (1 / sum)
// Two layouts compute exactly that. A set of many rows (prompt reading) puts
// rows in the vector lanes: each K/V value is converted once and broadcast to
// every row, and causal rows that end earlier are switched off with lane
// masks. A set of few rows (generation) puts keys in the lanes for the scores
// (16 K rows transposed in registers) and head dims in the lanes for the
// weighted sum.

constexpr int kRowTile = kAttentionRowTile;
constexpr int kManyRows = 5;   // sets with at least this many rows use the row-lane layout
constexpr int kKeyBlock = 64;  // K/V rows converted to f32 per block (row-lane layout)

inline int64_t Up16(int64_t n) { return (n + 15) & ~int64_t{15}; }

struct RowSet {
  const float* q[kRowTile];
  float* out[kRowTile];
  float* s[kRowTile];
  int64_t n_pos[kRowTile];
  int n = 0;
};

// One kv head's K and V rows: each its own type and row stride.
struct HeadKv {
  const uint8_t* k;
  const uint8_t* v;
  size_t k_rb, v_rb;
  DType k_type, v_type;
};

// Calls f(loader) with the row loader of `type` (the phases that read K and
// those that read V pick theirs apart, so the kernels exist once per type,
// not once per K/V pair).
template <class F>
void WithLoader(DType type, F&& f) {
  switch (type) {
    case DType::kF32:
      f(avx512::LoadF32{});
      break;
    case DType::kQ8_0:
      f(avx512::LoadQ8_0{});
      break;
    case DType::kQ4_0:
      f(avx512::LoadQ4_0{});
      break;
    default:
      f(avx512::LoadF16{});
      break;
  }
}

// ---- few rows: keys in lanes for the scores, dims in lanes for the sum

// Scores of NR rows against keys [0, n_max): s[i][p], 16 keys at a time
// (rows past n_max read as zeros; s rows are padded to a multiple of 16).
template <class L, int NR>
void ScoresFew(const RowSet& rs, const uint8_t* k, size_t rb, int hd, float scale, int64_t n_max) {
  const __m512 sc = _mm512_set1_ps(scale);
  const int full = hd / 16;
  const int row_lines = (hd * L::kBytesPer16 / 16 + 63) / 64;
  for (int64_t p0 = 0; p0 < n_max; p0 += 16) {
    const int nk = n_max - p0 < 16 ? static_cast<int>(n_max - p0) : 16;
    const uint8_t* rows = k + static_cast<size_t>(p0) * rb;
    // The block after next's rows (strided by the other kv heads): fetch them now.
    if (p0 + 48 <= n_max) {
      for (int j = 32; j < 48; ++j) {
        const char* r = reinterpret_cast<const char*>(rows + static_cast<size_t>(j) * rb);
        for (int l = 0; l < row_lines; ++l) _mm_prefetch(r + 64 * l, _MM_HINT_T0);
      }
    }
    __m512 acc[NR];
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) acc[i] = _mm512_setzero_ps();
    for (int c = 0; c < full; ++c) {
      const int d0 = 16 * c;
      __m512 t[16];
      if (nk == 16) {
        // One running pointer (16 row pointers would not fit in registers).
        const uint8_t* r = rows;
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j, r += rb) t[j] = L::Full(r, d0);
      } else {
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j)
          t[j] = j < nk ? L::Full(rows + static_cast<size_t>(j) * rb, d0) : _mm512_setzero_ps();
      }
      avx512::Transpose16x16(t);
#pragma GCC unroll 16
      for (int dd = 0; dd < 16; ++dd) {
#pragma GCC unroll 4
        for (int i = 0; i < NR; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(rs.q[i][d0 + dd]), t[dd], acc[i]);
      }
    }
    if (16 * full < hd) {  // head_dim not a multiple of 16
      const int d0 = 16 * full, nd = hd - d0;
      const __mmask16 m = FirstLanes(nd);
      __m512 t[16];
      for (int j = 0; j < 16; ++j)
        t[j] = j < nk ? L::Part(rows + static_cast<size_t>(j) * rb, d0, m) : _mm512_setzero_ps();
      avx512::Transpose16x16(t);
      for (int dd = 0; dd < nd; ++dd) {
        for (int i = 0; i < NR; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(rs.q[i][d0 + dd]), t[dd], acc[i]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) _mm512_storeu_ps(rs.s[i] + p0, _mm512_mul_ps(acc[i], sc));
  }
}

// Softmax weights in place over s[0, n); returns their sum (16 lane partials
// folded by HSum).
inline float ExpAndSum(float* s, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t p = 0; p < n; p += 16) {
    const __mmask16 m = n - p >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - p);
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, s + p));
  }
  const __m512 max = _mm512_set1_ps(HMax(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t p = 0; p < n; p += 16) {
    const __mmask16 m = n - p >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - p);
    const __m512 e = avx512::Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + p), max));
    _mm512_mask_storeu_ps(s + p, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return HSum(sum);
}

// out[i] = inv[i] * sum_{p < n_pos[i]} s[i][p] * v_p for NR rows, 16 W dims
// per pass over the rows (W = 8 for one or two rows: a 128-dim head in one
// pass, so each V row is fetched once); rows that end earlier stop their own
// chain there. Each output element is one FMA chain over p whatever W is,
// and however the positions shared by every row are cut into spans.

// Lane masks of the W vectors of dims [d0, d0 + 16 W) of a hd-dim head.
template <int W>
inline void PassMasks(int hd, int d0, __mmask16 (&m)[W]) {
  for (int j = 0; j < W; ++j) {
    const int rem = hd - d0 - 16 * j;
    m[j] = rem >= 16 ? static_cast<__mmask16>(0xFFFF) : (rem > 0 ? FirstLanes(rem) : 0);
  }
}

// acc[i][j] continues its chain over positions [pb, pe), which every row has.
// The rows are strided by the other kv heads: rows kAhead ahead (below
// n_fetch) are fetched, every line of this pass's slice.
template <class L, int NR, int W>
inline void WeightedSumSpan(const RowSet& rs, const uint8_t* v, size_t rb, int d0,
                            const __mmask16 (&m)[W], int64_t pb, int64_t pe, int64_t n_fetch,
                            __m512 (&acc)[NR][W]) {
  constexpr int64_t kAhead = 24;
  const int lines = (W * L::kBytesPer16 + 63) / 64 + 1;
  const size_t slice = static_cast<size_t>(d0) * L::kBytesPer16 / 16;
  const uint8_t* row = v + static_cast<size_t>(pb) * rb;
  const int64_t ahead = n_fetch - kAhead;
  for (int64_t p = pb; p < pe; ++p, row += rb) {
    if (p < ahead) {
      const char* r = reinterpret_cast<const char*>(row + kAhead * rb) + slice;
      for (int l = 0; l < lines; ++l) _mm_prefetch(r + 64 * l, _MM_HINT_T0);
    }
    __m512 vv[W];
#pragma GCC unroll 8
    for (int j = 0; j < W; ++j) vv[j] = L::Part(row, d0 + 16 * j, m[j]);
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
      const __m512 e = _mm512_set1_ps(rs.s[i][p]);
#pragma GCC unroll 8
      for (int j = 0; j < W; ++j) acc[i][j] = _mm512_fmadd_ps(e, vv[j], acc[i][j]);
    }
  }
}

// Each row's chain past the shared positions [0, n_min), then 1 / sum.
template <class L, int NR, int W>
inline void FinishPass(const RowSet& rs, const uint8_t* v, size_t rb, int d0,
                       const __mmask16 (&m)[W], const float* inv, int64_t n_min,
                       const __m512 (&acc)[NR][W]) {
  for (int i = 0; i < NR; ++i) {
    __m512 a[W];
    for (int j = 0; j < W; ++j) a[j] = acc[i][j];
    const uint8_t* r = v + static_cast<size_t>(n_min) * rb;
    for (int64_t p = n_min; p < rs.n_pos[i]; ++p, r += rb) {
      const __m512 e = _mm512_set1_ps(rs.s[i][p]);
      for (int j = 0; j < W; ++j) a[j] = _mm512_fmadd_ps(e, L::Part(r, d0 + 16 * j, m[j]), a[j]);
    }
    const __m512 iv = _mm512_set1_ps(inv[i]);
    for (int j = 0; j < W; ++j)
      _mm512_mask_storeu_ps(rs.out[i] + d0 + 16 * j, m[j], _mm512_mul_ps(a[j], iv));
  }
}

template <class L, int NR, int W>
void WeightedSumPass(const RowSet& rs, const uint8_t* v, size_t rb, int hd, int d0,
                     const float* inv, int64_t n_min) {
  __mmask16 m[W];
  PassMasks<W>(hd, d0, m);
  __m512 acc[NR][W];
  for (int i = 0; i < NR; ++i) {
    for (int j = 0; j < W; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  WeightedSumSpan<L, NR, W>(rs, v, rb, d0, m, 0, n_min, n_min, acc);
  FinishPass<L, NR, W>(rs, v, rb, d0, m, inv, n_min, acc);
}

template <class L, int NR>
void WeightedSumFew(const RowSet& rs, const uint8_t* v, size_t rb, int hd, const float* inv) {
  int64_t n_min = INT64_MAX;
  for (int i = 0; i < NR; ++i) n_min = rs.n_pos[i] < n_min ? rs.n_pos[i] : n_min;
  constexpr int kW = NR <= 2 ? 8 : 4;
  for (int d0 = 0; d0 < hd; d0 += 16 * kW) {
    if (hd - d0 <= 64) {
      WeightedSumPass<L, NR, 4>(rs, v, rb, hd, d0, inv, n_min);
    } else {
      WeightedSumPass<L, NR, kW>(rs, v, rb, hd, d0, inv, n_min);
    }
  }
}

template <int NR>
void AttendFewTyped(RowSet& rs, const HeadKv& kv, int hd, float scale, int64_t n_max,
                    float* scratch) {
  for (int i = 0; i < NR; ++i) rs.s[i] = scratch + i * Up16(n_max);
  WithLoader(kv.k_type,
             [&](auto l) { ScoresFew<decltype(l), NR>(rs, kv.k, kv.k_rb, hd, scale, n_max); });
  float inv[NR];  // 0 for a row without positions: its output is zeros
  for (int i = 0; i < NR; ++i)
    inv[i] = rs.n_pos[i] > 0 ? 1.0f / ExpAndSum(rs.s[i], rs.n_pos[i]) : 0.0f;
  WithLoader(kv.v_type,
             [&](auto l) { WeightedSumFew<decltype(l), NR>(rs, kv.v, kv.v_rb, hd, inv); });
}

inline void AttendFew(RowSet& rs, const HeadKv& kv, int hd, float scale, int64_t n_max,
                      float* scratch) {
  static_assert(kManyRows == 5, "AttendFew handles 1..4 rows");
  switch (rs.n) {
    case 4:
      AttendFewTyped<4>(rs, kv, hd, scale, n_max, scratch);
      break;
    case 3:
      AttendFewTyped<3>(rs, kv, hd, scale, n_max, scratch);
      break;
    case 2:
      AttendFewTyped<2>(rs, kv, hd, scale, n_max, scratch);
      break;
    default:
      AttendFewTyped<1>(rs, kv, hd, scale, n_max, scratch);
      break;
  }
}

}  // namespace
}  // namespace mx::kernels::internal
