// AVX-512 attention over F16, F32, Q8_0 and Q4_0 K/V rows: AttentionRows
// (one pass per kv head over its rows) and the two phases of long-context
// generation (AttentionScores over position ranges of every kv head,
// AttentionFromScores per kv head), which give the same bits.
#include <cmath>

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

// In-register transpose: r[i] holds row i (16 columns) on entry, column i on exit
// (the loops unrolled, or GCC keeps t and u on the stack).
__attribute__((always_inline)) inline void Transpose16(__m512* r) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + k]: in 128-bit block b, column 4b + k of rows 4i..4i+3.
  __m512 u[16];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xEE);
    r[k] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + k] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + k] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + k] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
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
      Transpose16(t);
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
      Transpose16(t);
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
float ExpAndSum(float* s, int64_t n) {
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

// WeightedSumPass for the sets of several kv heads (V of set k at v[k]) at
// once: the shared positions go kHeadsSpan at a time, every set in turn, so
// V is read in runs of the sets' adjacent head slices instead of one head's
// slice strided by the others. The accumulators wait in `acc` (n_sets x NR x
// W vectors) between spans: the same chains, the same bits.
template <class L, int NR, int W>
void WeightedSumPassHeads(const RowSet* sets, int n_sets, const uint8_t* const* v, size_t rb,
                          int hd, int d0, const float (*inv)[kRowTile], int64_t n_min,
                          __m512* acc) {
  constexpr int64_t kHeadsSpan = 64;
  __mmask16 m[W];
  PassMasks<W>(hd, d0, m);
  for (int64_t i = 0; i < static_cast<int64_t>(n_sets) * NR * W; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t pb = 0; pb < n_min; pb += kHeadsSpan) {
    const int64_t pe = n_min - pb < kHeadsSpan ? n_min : pb + kHeadsSpan;
    for (int k = 0; k < n_sets; ++k) {
      __m512 a[NR][W];
      __m512* mem = acc + static_cast<int64_t>(k) * NR * W;
      for (int i = 0; i < NR; ++i) {
        for (int j = 0; j < W; ++j) a[i][j] = mem[i * W + j];
      }
      WeightedSumSpan<L, NR, W>(sets[k], v[k], rb, d0, m, pb, pe, n_min, a);
      for (int i = 0; i < NR; ++i) {
        for (int j = 0; j < W; ++j) mem[i * W + j] = a[i][j];
      }
    }
  }
  for (int k = 0; k < n_sets; ++k) {
    __m512 a[NR][W];
    const __m512* mem = acc + static_cast<int64_t>(k) * NR * W;
    for (int i = 0; i < NR; ++i) {
      for (int j = 0; j < W; ++j) a[i][j] = mem[i * W + j];
    }
    FinishPass<L, NR, W>(sets[k], v[k], rb, d0, m, inv[k], n_min, a);
  }
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

void AttendFew(RowSet& rs, const HeadKv& kv, int hd, float scale, int64_t n_max, float* scratch) {
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

// ---- many rows: rows in lanes (G groups of 16 rows)

// f32 copy of rows [p0, p0 + n) of K or V (this kv head), hdp floats each,
// zero past hd; rows n..n_pad-1 all zeros.
template <class L>
void ConvertRows(const uint8_t* base, size_t rb, int64_t p0, int n, int n_pad, int hd, int hdp,
                 float* dst) {
  const int full = hd / 16;
  const __mmask16 tail = FirstLanes(hd - 16 * full);
  const int row_lines = (hd * L::kBytesPer16 / 16 + 63) / 64;
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = base + static_cast<size_t>(p0 + j) * rb;
    // The rows are strided (other kv heads in between): fetch well ahead.
    const char* ahead = reinterpret_cast<const char*>(row + 16 * rb);
    for (int l = 0; l < row_lines; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T0);
    float* out = dst + static_cast<size_t>(j) * hdp;
    int d0 = 0;
    for (int c = 0; c < full; ++c, d0 += 16) _mm512_storeu_ps(out + d0, L::Full(row, d0));
    if (d0 < hdp) _mm512_storeu_ps(out + d0, L::Part(row, d0, tail));
  }
  for (int j = n; j < n_pad; ++j) {
    for (int d0 = 0; d0 < hdp; d0 += 16)
      _mm512_storeu_ps(dst + static_cast<size_t>(j) * hdp + d0, _mm512_setzero_ps());
  }
}

// Scores of every row against keys [0, n_max) into st[p][G * 16].
template <class L, int G>
void ScoresMany(const float* qt, const uint8_t* k, size_t rb, int hd, int hdp, float scale,
                int64_t n_max, float* kf, float* st) {
  constexpr int NK = 16 / G;  // keys per register block: G * NK = 16 accumulators
  constexpr int W = 16 * G;
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t p0 = 0; p0 < n_max; p0 += kKeyBlock) {
    const int nk = n_max - p0 < kKeyBlock ? static_cast<int>(n_max - p0) : kKeyBlock;
    const int nk_pad = (nk + NK - 1) / NK * NK;
    ConvertRows<L>(k, rb, p0, nk, nk_pad, hd, hdp, kf);
    for (int j0 = 0; j0 < nk_pad; j0 += NK) {
      __m512 acc[NK][G];
#pragma GCC unroll 16
      for (int j = 0; j < NK; ++j) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) acc[j][g] = _mm512_setzero_ps();
      }
      const float* kb = kf + static_cast<size_t>(j0) * hdp;
      for (int d = 0; d < hd; ++d) {
        __m512 q[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g)
          q[g] = _mm512_loadu_ps(qt + static_cast<size_t>(d) * W + 16 * g);
#pragma GCC unroll 16
        for (int j = 0; j < NK; ++j) {
          const __m512 kv = _mm512_set1_ps(kb[static_cast<size_t>(j) * hdp + d]);
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g) acc[j][g] = _mm512_fmadd_ps(q[g], kv, acc[j][g]);
        }
      }
#pragma GCC unroll 16
      for (int j = 0; j < NK; ++j) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g)
          _mm512_storeu_ps(st + static_cast<size_t>(p0 + j0 + j) * W + 16 * g,
                           _mm512_mul_ps(acc[j][g], sc));
      }
    }
  }
}

// Softmax over st[p][g] in place for the rows of group g (lane r alive at p
// when p < n_pos[r]); returns 1 / sum per lane (0 for rows without positions).
template <int G>
__m512 ExpAndSumMany(float* st, int g, __m512i npos, int64_t n_max) {
  constexpr int W = 16 * G;
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t p = 0; p < n_max; ++p) {
    const __mmask16 live = _mm512_cmpgt_epi32_mask(npos, _mm512_set1_epi32(static_cast<int>(p)));
    mx = _mm512_mask_max_ps(mx, live, mx, _mm512_loadu_ps(st + p * W + 16 * g));
  }
  __m512 part[16];
  for (int l = 0; l < 16; ++l) part[l] = _mm512_setzero_ps();
  for (int64_t p0 = 0; p0 < n_max; p0 += 16) {
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) {
      const int64_t p = p0 + l;
      if (p >= n_max) break;
      const __mmask16 live = _mm512_cmpgt_epi32_mask(npos, _mm512_set1_epi32(static_cast<int>(p)));
      float* sp = st + p * W + 16 * g;
      const __m512 e = avx512::Exp(_mm512_sub_ps(_mm512_loadu_ps(sp), mx));
      _mm512_storeu_ps(sp, e);
      part[l] = _mm512_mask_add_ps(part[l], live, part[l], e);
    }
  }
  for (int l = 0; l < 8; ++l) part[l] = _mm512_add_ps(part[l], part[l + 8]);
  for (int l = 0; l < 4; ++l) part[l] = _mm512_add_ps(part[l], part[l + 4]);
  for (int l = 0; l < 2; ++l) part[l] = _mm512_add_ps(part[l], part[l + 2]);
  const __m512 sum = _mm512_add_ps(part[0], part[1]);
  const __mmask16 any = _mm512_cmpgt_epi32_mask(npos, _mm512_setzero_si512());
  return _mm512_maskz_div_ps(any, _mm512_set1_ps(1.0f), sum);
}

// ot[d][G * 16] += sum_p e[p] * v_p[d] over every row's own positions.
template <class L, int G>
void WeightedSumMany(const float* st, const __m512i* npos, const uint8_t* v, size_t rb, int hd,
                     int hdp, int64_t n_max, float* vf, float* ot) {
  constexpr int D = 16 / G;  // dims per register block: D * G = 16 accumulators
  constexpr int W = 16 * G;
  for (int64_t p0 = 0; p0 < n_max; p0 += kKeyBlock) {
    const int nk = n_max - p0 < kKeyBlock ? static_cast<int>(n_max - p0) : kKeyBlock;
    ConvertRows<L>(v, rb, p0, nk, nk, hd, hdp, vf);
    for (int d0 = 0; d0 < hdp; d0 += D) {
      __m512 acc[D][G];
#pragma GCC unroll 16
      for (int dd = 0; dd < D; ++dd) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g)
          acc[dd][g] = _mm512_loadu_ps(ot + static_cast<size_t>(d0 + dd) * W + 16 * g);
      }
      for (int j = 0; j < nk; ++j) {
        const int64_t p = p0 + j;
        __m512 e[G];
        __mmask16 live[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          e[g] = _mm512_loadu_ps(st + p * W + 16 * g);
          live[g] = _mm512_cmpgt_epi32_mask(npos[g], _mm512_set1_epi32(static_cast<int>(p)));
        }
        const float* vr = vf + static_cast<size_t>(j) * hdp + d0;
#pragma GCC unroll 16
        for (int dd = 0; dd < D; ++dd) {
          const __m512 vb = _mm512_set1_ps(vr[dd]);
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g)
            acc[dd][g] = _mm512_mask3_fmadd_ps(e[g], vb, acc[dd][g], live[g]);
        }
      }
#pragma GCC unroll 16
      for (int dd = 0; dd < D; ++dd) {
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g)
          _mm512_storeu_ps(ot + static_cast<size_t>(d0 + dd) * W + 16 * g, acc[dd][g]);
      }
    }
  }
}

template <int G>
void AttendManyTyped(const RowSet& rs, const HeadKv& kv, int hd, float scale, int64_t n_max,
                     float* scratch) {
  constexpr int W = 16 * G;
  const int hdp = static_cast<int>(Up16(hd));
  float* st = scratch;                              // [Up16(n_max)][W]
  float* qt = st + Up16(n_max) * W;                 // [hdp][W]
  float* ot = qt + static_cast<int64_t>(hdp) * W;   // [hdp][W]
  float* kvf = ot + static_cast<int64_t>(hdp) * W;  // [kKeyBlock][hdp]
  for (int d = 0; d < hdp; ++d) {
    for (int r = 0; r < W; ++r) qt[d * W + r] = r < rs.n && d < hd ? rs.q[r][d] : 0.0f;
  }
  for (int i = 0; i < hdp * W; ++i) ot[i] = 0.0f;
  alignas(64) int32_t np[W];
  for (int r = 0; r < W; ++r) np[r] = r < rs.n ? static_cast<int32_t>(rs.n_pos[r]) : 0;
  __m512i npos[G];
  for (int g = 0; g < G; ++g) npos[g] = _mm512_load_si512(np + 16 * g);

  WithLoader(kv.k_type, [&](auto l) {
    ScoresMany<decltype(l), G>(qt, kv.k, kv.k_rb, hd, hdp, scale, n_max, kvf, st);
  });
  __m512 inv[G];
  for (int g = 0; g < G; ++g) inv[g] = ExpAndSumMany<G>(st, g, npos[g], n_max);
  WithLoader(kv.v_type, [&](auto l) {
    WeightedSumMany<decltype(l), G>(st, npos, kv.v, kv.v_rb, hd, hdp, n_max, kvf, ot);
  });

  for (int d = 0; d < hd; ++d) {
    for (int g = 0; g < G; ++g) {
      float* o = ot + d * W + 16 * g;
      _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_loadu_ps(o), inv[g]));
    }
  }
  for (int r = 0; r < rs.n; ++r) {
    for (int d = 0; d < hd; ++d) rs.out[r][d] = ot[d * W + r];
  }
}

// All rows of `rs` read the kv head `kv`.
void AttendSet(RowSet& rs, const HeadKv& kv, int hd, float scale, float* scratch) {
  int64_t n_max = 0;
  for (int r = 0; r < rs.n; ++r) n_max = rs.n_pos[r] > n_max ? rs.n_pos[r] : n_max;
  if (n_max <= 0) {
    for (int r = 0; r < rs.n; ++r) {
      for (int d = 0; d < hd; ++d) rs.out[r][d] = 0.0f;
    }
    return;
  }
  if (rs.n < kManyRows) {
    AttendFew(rs, kv, hd, scale, n_max, scratch);
  } else if (rs.n <= 16) {
    AttendManyTyped<1>(rs, kv, hd, scale, n_max, scratch);
  } else {
    AttendManyTyped<2>(rs, kv, hd, scale, n_max, scratch);
  }
}

}  // namespace

void AttentionRowsAvx512(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                         const int64_t* n_pos, float scale, float* out, int64_t ldo,
                         float* scratch) {
  const int hd = kv.head_dim;
  const int n_kv = kv.n_kv_head > 0 ? kv.n_kv_head : 1;
  const int group = n_head >= n_kv ? n_head / n_kv : 1;
  const size_t k_head = RowBytes(kv.k_type, hd), v_head = RowBytes(kv.v_type, hd);
  for (int kvh = 0; kvh < n_kv && kvh * group < n_head; ++kvh) {
    const HeadKv head{kv.k + static_cast<size_t>(kvh) * k_head,
                      kv.v + static_cast<size_t>(kvh) * v_head,
                      kv.k_row_bytes,
                      kv.v_row_bytes,
                      kv.k_type,
                      kv.v_type};
    RowSet rs;
    for (int64_t i = 0; i < n_q; ++i) {
      for (int g = 0; g < group; ++g) {
        const int64_t h = static_cast<int64_t>(kvh) * group + g;
        rs.q[rs.n] = q + i * ldq + h * hd;
        rs.out[rs.n] = out + i * ldo + h * hd;
        rs.n_pos[rs.n] = n_pos[i];
        if (++rs.n == kRowTile) {
          AttendSet(rs, head, hd, scale, scratch);
          rs.n = 0;
        }
      }
    }
    if (rs.n > 0) AttendSet(rs, head, hd, scale, scratch);
  }
}

// ------------------------------------------------- long-context generation

namespace {

// The few-row set of kv head kvh (AttentionRows's rows: query i, head
// kvh * group + g, in that order), score rows at s + (i * n_head + h) * lds
// + p_off.
RowSet FewSet(const float* q, int64_t ldq, int64_t n_q, int n_head, int group, int kvh, int hd,
              const int64_t* n_pos, float* s, int64_t lds, int64_t p_off, float* out, int64_t ldo) {
  RowSet rs;
  for (int64_t i = 0; i < n_q; ++i) {
    for (int g = 0; g < group; ++g) {
      const int64_t h = static_cast<int64_t>(kvh) * group + g;
      rs.q[rs.n] = q != nullptr ? q + i * ldq + h * hd : nullptr;
      rs.out[rs.n] = out != nullptr ? out + i * ldo + h * hd : nullptr;
      rs.s[rs.n] = s + (i * n_head + h) * lds + p_off;
      rs.n_pos[rs.n] = n_pos[i];
      ++rs.n;
    }
  }
  return rs;
}

template <int NR>
void ScoresOf(const RowSet& rs, DType type, const uint8_t* k, size_t rb, int hd, float scale,
              int64_t n) {
  WithLoader(type, [&](auto l) { ScoresFew<decltype(l), NR>(rs, k, rb, hd, scale, n); });
}
template <int NR>
void FromScoresOf(RowSet& rs, const HeadKv& kv, int hd) {
  float inv[NR];  // 0 for a row without positions: its output is zeros
  for (int i = 0; i < NR; ++i)
    inv[i] = rs.n_pos[i] > 0 ? 1.0f / ExpAndSum(rs.s[i], rs.n_pos[i]) : 0.0f;
  WithLoader(kv.v_type,
             [&](auto l) { WeightedSumFew<decltype(l), NR>(rs, kv.v, kv.v_rb, hd, inv); });
}

// FromScoresOf for the sets of adjacent kv heads (WeightedSumPassHeads).
constexpr int kMaxHeadsSets = 16;
template <int NR>
void FromScoresOfHeads(RowSet* sets, int n_sets, const uint8_t* const* v, DType v_type, size_t rb,
                       int hd) {
  float inv[kMaxHeadsSets][kRowTile];
  int64_t n_min = INT64_MAX;
  for (int k = 0; k < n_sets; ++k) {
    for (int i = 0; i < NR; ++i) {
      const RowSet& rs = sets[k];
      inv[k][i] = rs.n_pos[i] > 0 ? 1.0f / ExpAndSum(rs.s[i], rs.n_pos[i]) : 0.0f;
      n_min = rs.n_pos[i] < n_min ? rs.n_pos[i] : n_min;
    }
  }
  constexpr int kW = NR <= 2 ? 8 : 4;
  auto* acc = static_cast<__m512*>(
      avx512::ThreadScratch(static_cast<size_t>(n_sets) * NR * kW * sizeof(__m512)));
  WithLoader(v_type, [&](auto l) {
    using L = decltype(l);
    for (int d0 = 0; d0 < hd; d0 += 16 * kW) {
      if (hd - d0 <= 64) {
        WeightedSumPassHeads<L, NR, 4>(sets, n_sets, v, rb, hd, d0, inv, n_min, acc);
      } else {
        WeightedSumPassHeads<L, NR, kW>(sets, n_sets, v, rb, hd, d0, inv, n_min, acc);
      }
    }
  });
}

int GroupOf(int n_head, const KvView& kv) {
  const int n_kv = kv.n_kv_head > 0 ? kv.n_kv_head : 1;
  return n_head >= n_kv ? n_head / n_kv : 1;
}

}  // namespace

bool AttentionSplitFits(int64_t n_q, int n_head, const KvView& kv) {
  return n_q * GroupOf(n_head, kv) < kManyRows;
}

void AttentionScoresAvx512(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                           const int64_t* n_pos, int64_t p0, int64_t p1, float scale, float* s,
                           int64_t lds) {
  const int hd = kv.head_dim, group = GroupOf(n_head, kv);
  const int n_kv = kv.n_kv_head > 0 ? kv.n_kv_head : 1;
  const size_t k_head = RowBytes(kv.k_type, hd), rb = kv.k_row_bytes;
  int64_t n_max = 0;
  for (int64_t i = 0; i < n_q; ++i) n_max = n_pos[i] > n_max ? n_pos[i] : n_max;
  const int64_t end = p1 < n_max ? p1 : n_max;
  // Whole rows are read one 16-row block at a time, every kv head in turn;
  // the block after next is fetched a few rows per kv head.
  const int row_lines = static_cast<int>((rb + 63) / 64);
  const int fetch_rows = (16 + n_kv - 1) / n_kv;
  for (int64_t b = p0; b < end; b += 16) {
    const int64_t n = end - b < 16 ? end - b : 16;
    const uint8_t* rows = kv.k + static_cast<size_t>(b) * rb;
    for (int kvh = 0; kvh < n_kv && kvh * group < n_head; ++kvh) {
      for (int j = 32 + kvh * fetch_rows; j < 32 + (kvh + 1) * fetch_rows && j < 48; ++j) {
        if (b + j >= end) break;
        const char* r = reinterpret_cast<const char*>(rows + static_cast<size_t>(j) * rb);
        for (int l = 0; l < row_lines; ++l) _mm_prefetch(r + 64 * l, _MM_HINT_T0);
      }
      const RowSet rs = FewSet(q, ldq, n_q, n_head, group, kvh, hd, n_pos, s, lds, b, nullptr, 0);
      const uint8_t* k = rows + static_cast<size_t>(kvh) * k_head;
      switch (rs.n) {
        case 4:
          ScoresOf<4>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
        case 3:
          ScoresOf<3>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
        case 2:
          ScoresOf<2>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
        default:
          ScoresOf<1>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
      }
    }
  }
}

void AttentionFromScoresAvx512(int64_t n_q, int n_head, const KvView& kv, const int64_t* n_pos,
                               int kv0, int kv1, float* s, int64_t lds, float* out, int64_t ldo) {
  const int hd = kv.head_dim, group = GroupOf(n_head, kv);
  const size_t v_head = RowBytes(kv.v_type, hd);
  int64_t n_max = 0;
  for (int64_t i = 0; i < n_q; ++i) n_max = n_pos[i] > n_max ? n_pos[i] : n_max;
  if (kv1 > kv0 + 1 && n_max > 0) {
    // Every set has the same queries, hence the same row count.
    RowSet sets[kMaxHeadsSets];
    const uint8_t* v[kMaxHeadsSets];
    int n_sets = 0;
    for (int kvh = kv0; kvh < kv1 && kvh * group < n_head; ++kvh) {
      if (n_sets == kMaxHeadsSets) {  // the rest in further calls of at most as many
        AttentionFromScoresAvx512(n_q, n_head, kv, n_pos, kvh, kv1, s, lds, out, ldo);
        break;
      }
      sets[n_sets] = FewSet(nullptr, 0, n_q, n_head, group, kvh, hd, n_pos, s, lds, 0, out, ldo);
      v[n_sets++] = kv.v + static_cast<size_t>(kvh) * v_head;
    }
    switch (sets[0].n) {
      case 4:
        FromScoresOfHeads<4>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
      case 3:
        FromScoresOfHeads<3>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
      case 2:
        FromScoresOfHeads<2>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
      default:
        FromScoresOfHeads<1>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
    }
    return;
  }
  for (int kvh = kv0; kvh < kv1 && kvh * group < n_head; ++kvh) {
    RowSet rs = FewSet(nullptr, 0, n_q, n_head, group, kvh, hd, n_pos, s, lds, 0, out, ldo);
    if (n_max <= 0) {
      for (int r = 0; r < rs.n; ++r) {
        for (int d = 0; d < hd; ++d) rs.out[r][d] = 0.0f;
      }
      continue;
    }
    const HeadKv head{kv.k,           kv.v + static_cast<size_t>(kvh) * v_head,
                      kv.k_row_bytes, kv.v_row_bytes,
                      kv.k_type,      kv.v_type};
    switch (rs.n) {
      case 4:
        FromScoresOf<4>(rs, head, hd);
        break;
      case 3:
        FromScoresOf<3>(rs, head, hd);
        break;
      case 2:
        FromScoresOf<2>(rs, head, hd);
        break;
      default:
        FromScoresOf<1>(rs, head, hd);
        break;
    }
  }
}

}  // namespace mx::kernels::internal
