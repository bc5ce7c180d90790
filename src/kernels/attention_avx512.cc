// AVX-512 attention over F16, F32, Q8_0 and Q4_0 K/V rows: AttentionRows, one
// pass per kv head over its rows (attention_avx512.h: the per-row arithmetic
// and the few-row layout; here the many-row layout).
#include "kernels/attention_avx512.h"

namespace mx::kernels::internal {
namespace {

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

}  // namespace mx::kernels::internal
