// AVX-512 path for the vector kernels: KV row conversion (F16C, RNE), RMS
// norm sums, SwiGLU / SiLU with a SIMD exp, and attention (AttentionRows). Tails
// run through the same vector code with masks, so an element's value never
// depends on where it sits in the array.
#include <cmath>

#include "kernels/isa.h"
#include "kernels/simd_avx512.h"

namespace mx::kernels::internal {
namespace {

using avx512::FirstLanes;
using avx512::HMax;
using avx512::HSum;
using avx512::HSum4;

void F32ToF16Row(const float* src, int64_t n, uint16_t* dst) {
  constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRne));
  }
  if (i < n) {
    const __mmask16 m = FirstLanes(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), kRne));
  }
}

void F16ToF32Row(const uint16_t* src, int64_t n, float* dst) {
  DequantAvx512(DType::kF16, reinterpret_cast<const uint8_t*>(src), dst, n);
}

double HSumPd(__m512d v) {
  const __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
  __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  b = _mm_add_sd(b, _mm_unpackhi_pd(b, b));
  return _mm_cvtsd_f64(b);
}

double SumSquares(const float* x, int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v =
        n - i >= 16 ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(FirstLanes(n - i), x + i);
    const __m512 sq = _mm512_mul_ps(v, v);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
  }
  return HSumPd(_mm512_add_pd(lo, hi));
}

void ScaleMul(const float* x, const float* w, float scale, int64_t n, float* out) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    if (w != nullptr) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(avx512::Silu(g), u));
  }
}

void Silu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - i);
    _mm512_mask_storeu_ps(x + i, m, avx512::Silu(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// ------------------------------------------------------------- attention
//
// Up to kAttentionQueryTile queries of one head are processed together so each
// K/V row is loaded once for all of them. Per query the arithmetic is the
// same whatever the tile: a score is one 16-lane FMA chain over head_dim
// (masked tail) reduced by the HSum tree, times scale; softmax over its own
// n_pos; each output vector one FMA chain over p in order, times 1/sum.

constexpr int kQT = kAttentionQueryTile;

// Scores of NQ queries against NP (<= 4) consecutive key rows: s[i][j].
template <class L, int NQ, int NP>
void Scores(const float* const* q, const uint8_t* k, size_t rb, int hd, float scale,
            float* const* s, int64_t p) {
  const uint8_t* rows[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) rows[j] = k + static_cast<size_t>(p + (j < NP ? j : 0)) * rb;
  __m512 acc[NQ][4];
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int d = 0;
  for (; d + 16 <= hd; d += 16) {
    __m512 kv[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) kv[j] = L::Full(rows[j], d);
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
      const __m512 qv = _mm512_loadu_ps(q[i] + d);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_fmadd_ps(kv[j], qv, acc[i][j]);
    }
  }
  if (d < hd) {
    const __mmask16 m = FirstLanes(hd - d);
    __m512 kv[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) kv[j] = L::Part(rows[j], d, m);
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q[i] + d);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_fmadd_ps(kv[j], qv, acc[i][j]);
    }
  }
  const __m128 sc = _mm_set1_ps(scale);
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) {
    const __m128 r = _mm_mul_ps(HSum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), sc);
    _mm_mask_storeu_ps(s[i] + p, static_cast<__mmask8>((1u << NP) - 1u), r);
  }
}

// Softmax weights in place over s[0, n); returns their sum.
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

// NQ queries of one head; K/V of that head at kv.k/v + offset.
template <class L, int NQ>
void AttentionTile(const float* const* q, const int64_t* n_pos, const KvView& kv, size_t offset,
                   float scale, float* const* out, float* const* s) {
  const int hd = kv.head_dim;
  const uint8_t* k = kv.k + offset;
  const uint8_t* v = kv.v + offset;
  const size_t rb = kv.row_bytes;
  int64_t n_max = 0;
  for (int i = 0; i < NQ; ++i) n_max = n_pos[i] > n_max ? n_pos[i] : n_max;
  int64_t p = 0;
  for (; p + 4 <= n_max; p += 4) Scores<L, NQ, 4>(q, k, rb, hd, scale, s, p);
  switch (n_max - p) {
    case 3:
      Scores<L, NQ, 3>(q, k, rb, hd, scale, s, p);
      break;
    case 2:
      Scores<L, NQ, 2>(q, k, rb, hd, scale, s, p);
      break;
    case 1:
      Scores<L, NQ, 1>(q, k, rb, hd, scale, s, p);
      break;
    default:
      break;
  }
  __m512 inv[NQ];  // 0 for a query without positions: its output is zeros
  for (int i = 0; i < NQ; ++i)
    inv[i] = _mm512_set1_ps(n_pos[i] > 0 ? 1.0f / ExpAndSum(s[i], n_pos[i]) : 0.0f);
  for (int d0 = 0; d0 < hd; d0 += 64) {
    __mmask16 m[4];
    for (int j = 0; j < 4; ++j) {
      const int rem = hd - d0 - 16 * j;
      m[j] = rem >= 16 ? static_cast<__mmask16>(0xFFFF) : (rem > 0 ? FirstLanes(rem) : 0);
    }
    __m512 acc[NQ][4];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
    }
    for (int64_t pp = 0; pp < n_max; ++pp) {
      const uint8_t* row = v + static_cast<size_t>(pp) * rb;
      __m512 vv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) vv[j] = L::Part(row, d0 + 16 * j, m[j]);
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) {
        if (pp >= n_pos[i]) continue;
        const __m512 e = _mm512_set1_ps(s[i][pp]);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(e, vv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < NQ; ++i) {
      for (int j = 0; j < 4; ++j)
        _mm512_mask_storeu_ps(out[i] + d0 + 16 * j, m[j], _mm512_mul_ps(acc[i][j], inv[i]));
    }
  }
}

template <class L>
void AttentionRowsTyped(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                        const int64_t* n_pos, float scale, float* out, int64_t ldo,
                        float* scratch) {
  const int hd = kv.head_dim;
  const int group = kv.n_kv_head > 0 && n_head >= kv.n_kv_head ? n_head / kv.n_kv_head : 1;
  const size_t elt = kv.type == DType::kF16 ? 2 : 4;
  for (int64_t i0 = 0; i0 < n_q; i0 += kQT) {
    const int nq = static_cast<int>(n_q - i0 < kQT ? n_q - i0 : kQT);
    int64_t n_max = 0;
    for (int i = 0; i < nq; ++i) n_max = n_pos[i0 + i] > n_max ? n_pos[i0 + i] : n_max;
    for (int h = 0; h < n_head; ++h) {
      const float* qs[kQT];
      float* os[kQT];
      float* ss[kQT];
      for (int i = 0; i < nq; ++i) {
        qs[i] = q + (i0 + i) * ldq + static_cast<int64_t>(h) * hd;
        os[i] = out + (i0 + i) * ldo + static_cast<int64_t>(h) * hd;
        ss[i] = scratch + i * n_max;
      }
      const int64_t* np = n_pos + i0;
      if (n_max <= 0) {
        for (int i = 0; i < nq; ++i) {
          for (int d = 0; d < hd; ++d) os[i][d] = 0.0f;
        }
        continue;
      }
      const size_t offset = static_cast<size_t>(h / group) * static_cast<size_t>(hd) * elt;
      switch (nq) {
        case 4:
          AttentionTile<L, 4>(qs, np, kv, offset, scale, os, ss);
          break;
        case 3:
          AttentionTile<L, 3>(qs, np, kv, offset, scale, os, ss);
          break;
        case 2:
          AttentionTile<L, 2>(qs, np, kv, offset, scale, os, ss);
          break;
        default:
          AttentionTile<L, 1>(qs, np, kv, offset, scale, os, ss);
          break;
      }
    }
  }
}

void AttentionRows(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                   const int64_t* n_pos, float scale, float* out, int64_t ldo, float* scratch) {
  if (kv.type == DType::kF16) {
    AttentionRowsTyped<avx512::LoadF16>(q, ldq, n_q, n_head, kv, n_pos, scale, out, ldo, scratch);
  } else {
    AttentionRowsTyped<avx512::LoadF32>(q, ldq, n_q, n_head, kv, n_pos, scale, out, ldo, scratch);
  }
}

// Measured on the 2-core Xeon: F16/BF16 convert in registers faster than
// through a panel at every batch size; F32 panels win above ~16 tokens
// (aligned loads); Q8_0's in-register dequantisation costs more than a
// panel beyond one 6-token tile.
int64_t DirectMaxTokens(DType type) {
  switch (type) {
    case DType::kF32:
      return 16;
    case DType::kF16:
    case DType::kBF16:
      return INT64_MAX;
    case DType::kQ8_0:
      return 6;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return 4;  // matmul_avx512.cc kFusedTokens
    default:
      return 0;
  }
}

const IsaOps kAvx512Ops = {
    .isa = Isa::kAvx512,
    .gemm = GemmAvx512,
    .direct_max_tokens = DirectMaxTokens,
    .dequant_row = DequantAvx512,
    .f32_to_f16 = F32ToF16Row,
    .f16_to_f32 = F16ToF32Row,
    .sum_squares = SumSquares,
    .scale_mul = ScaleMul,
    .swiglu = SwiGlu,
    .silu = Silu,
    .attention_rows = AttentionRows,
};

}  // namespace

const IsaOps& Avx512Ops() { return kAvx512Ops; }

}  // namespace mx::kernels::internal
