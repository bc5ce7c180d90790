// AVX2 path for the vector kernels: KV row conversion (F16C, RNE), RMS norm
// sums, SwiGLU / SiLU with a SIMD exp, and attention (AttentionRows) over F16,
// F32, Q8_0 and Q4_0 K/V rows. Tails run
// through the same vector code with masks, so an element's value never
// depends on where it sits in the array.
#include <cmath>
#include <cstring>

#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

namespace mx::kernels::internal {
namespace {

using avx2::FirstLanes;
using avx2::HMax;
using avx2::HSum;
using avx2::HSum4;

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
constexpr int64_t kDirectF16Tokens = 12;  // measured: panels win from ~32 tokens

void F32ToF16Row(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRne));
  }
  if (i < n) {
    uint16_t tmp[8];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp),
                     _mm256_cvtps_ph(_mm256_maskload_ps(src + i, FirstLanes(n - i)), kRne));
    std::memcpy(dst + i, tmp, static_cast<size_t>(n - i) * 2);
  }
}

void F16ToF32Row(const uint16_t* src, int64_t n, float* dst) {
  DequantAvx2(DType::kF16, reinterpret_cast<const uint8_t*>(src), dst, n);
}

// f32 terms summed in double: each step adds its low and high 4 lanes to
// two accumulators, which are then added lane-wise and across.
struct DoubleSum {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  void Add(__m256 v) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double Total() const {
    const __m256d a = _mm256_add_pd(lo, hi);
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    b = _mm_add_sd(b, _mm_unpackhi_pd(b, b));
    return _mm_cvtsd_f64(b);
  }
};

double SumSquares(const float* x, int64_t n) {
  DoubleSum sum;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v =
        n - i >= 8 ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, FirstLanes(n - i));
    sum.Add(_mm256_mul_ps(v, v));
  }
  return sum.Total();
}

// Lanes of the step at i: all, or the first n - i.
inline __m256i StepMask(int64_t i, int64_t n) { return FirstLanes(n - i >= 8 ? 8 : n - i); }

float MaxValue(const float* x, int64_t n) {
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = StepMask(i, n);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    // Only lanes in range and above the running max (NaN compares false).
    const __m256 gt = _mm256_and_ps(_mm256_castsi256_ps(m), _mm256_cmp_ps(v, mx, _CMP_GT_OQ));
    mx = _mm256_blendv_ps(mx, v, gt);
  }
  return HMax(mx);
}

double SumExp(const float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  DoubleSum sum;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = StepMask(i, n);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    // Lanes past n and NaN lanes add 0.
    const __m256 keep = _mm256_and_ps(_mm256_castsi256_ps(m), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    sum.Add(_mm256_and_ps(keep, avx2::Exp(_mm256_sub_ps(v, s))));
  }
  return sum.Total();
}

void ScaleMul(const float* x, const float* w, float scale, int64_t n, float* out) {
  const __m256 s = _mm256_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = StepMask(i, n);
    __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), s);
    if (w != nullptr) v = _mm256_mul_ps(v, _mm256_maskload_ps(w + i, m));
    _mm256_maskstore_ps(out + i, m, v);
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = StepMask(i, n);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 u = _mm256_maskload_ps(up + i, m);
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(avx2::Silu(g), u));
  }
}

void Silu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = StepMask(i, n);
    _mm256_maskstore_ps(x + i, m, avx2::Silu(_mm256_maskload_ps(x + i, m)));
  }
}

// ------------------------------------------------------------- attention
//
// Up to kAttentionQueryTile queries of one head are processed together so each
// K/V row is loaded once for all of them. Per query the arithmetic is the
// same whatever the tile: a score is one 8-lane FMA chain over head_dim
// (masked tail) reduced by the HSum tree, times scale; softmax over its own
// n_pos; each output vector one FMA chain over p in order, times 1/sum.

constexpr int kQT = kAttentionQueryTile;

// Scores of NQ (<= 2, for the 16 registers) queries against NP (<= 4)
// consecutive key rows.
template <class L, int NQ, int NP>
void Scores(const float* const* q, const uint8_t* k, size_t rb, int hd, float scale,
            float* const* s, int64_t p) {
  const uint8_t* rows[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) rows[j] = k + static_cast<size_t>(p + (j < NP ? j : 0)) * rb;
  __m256 acc[NQ][4];
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  int d = 0;
  for (; d + 8 <= hd; d += 8) {
    __m256 kv[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) kv[j] = L::Full(rows[j], d);
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
      const __m256 qv = _mm256_loadu_ps(q[i] + d);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm256_fmadd_ps(kv[j], qv, acc[i][j]);
    }
  }
  if (d < hd) {
    __m256 kv[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) kv[j] = L::Part(rows[j], d, hd - d);
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
      const __m256 qv = _mm256_maskload_ps(q[i] + d, FirstLanes(hd - d));
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm256_fmadd_ps(kv[j], qv, acc[i][j]);
    }
  }
  const __m128 sc = _mm_set1_ps(scale);
  const __m128i m = _mm256_castsi256_si128(FirstLanes(NP));
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) {
    const __m128 r = _mm_mul_ps(HSum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), sc);
    _mm_maskstore_ps(s[i] + p, m, r);
  }
}

template <class L, int NP>
void ScoresAll(int nq, const float* const* q, const uint8_t* k, size_t rb, int hd, float scale,
               float* const* s, int64_t p) {
  for (int i = 0; i < nq; i += 2) {
    if (nq - i >= 2) {
      Scores<L, 2, NP>(q + i, k, rb, hd, scale, s + i, p);
    } else {
      Scores<L, 1, NP>(q + i, k, rb, hd, scale, s + i, p);
    }
  }
}

// Softmax weights in place over s[0, n); returns their sum.
float ExpAndSum(float* s, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 mx = neg_inf;
  for (int64_t p = 0; p < n; p += 8) {
    const __m256i m = StepMask(p, n);
    mx = _mm256_max_ps(
        mx, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(s + p, m), _mm256_castsi256_ps(m)));
  }
  const __m256 max = _mm256_set1_ps(HMax(mx));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t p = 0; p < n; p += 8) {
    const __m256i m = StepMask(p, n);
    const __m256 e = avx2::Exp(_mm256_sub_ps(_mm256_maskload_ps(s + p, m), max));
    _mm256_maskstore_ps(s + p, m, e);
    sum = _mm256_add_ps(sum, _mm256_and_ps(e, _mm256_castsi256_ps(m)));
  }
  return HSum(sum);
}

// Calls f(loader) with the row loader of `type` (the scores read K with
// theirs and the weighted sums V with theirs, so each kernel exists once per
// type, not once per K/V pair).
template <class F>
void WithLoader(DType type, F&& f) {
  switch (type) {
    case DType::kF32:
      f(avx2::LoadF32{});
      break;
    case DType::kQ8_0:
      f(avx2::LoadQ8_0{});
      break;
    case DType::kQ4_0:
      f(avx2::LoadQ4_0{});
      break;
    default:
      f(avx2::LoadF16{});
      break;
  }
}

// Scores s[i][p] of NQ queries of one head against key rows [0, n_max).
template <class L, int NQ>
void TileScores(const float* const* q, const uint8_t* k, size_t rb, int hd, float scale,
                float* const* s, int64_t n_max) {
  int64_t p = 0;
  for (; p + 4 <= n_max; p += 4) ScoresAll<L, 4>(NQ, q, k, rb, hd, scale, s, p);
  switch (n_max - p) {
    case 3:
      ScoresAll<L, 3>(NQ, q, k, rb, hd, scale, s, p);
      break;
    case 2:
      ScoresAll<L, 2>(NQ, q, k, rb, hd, scale, s, p);
      break;
    case 1:
      ScoresAll<L, 1>(NQ, q, k, rb, hd, scale, s, p);
      break;
    default:
      break;
  }
}

// out[i] = inv[i] * sum_{p < n_pos[i]} s[i][p] * v_p, one FMA chain per
// output vector over p in order.
template <class L, int NQ>
void TileSum(const int64_t* n_pos, const uint8_t* v, size_t rb, int hd, const float* const* s,
             const __m256* inv, int64_t n_max, float* const* out) {
  for (int d0 = 0; d0 < hd; d0 += 16) {
    const int cnt0 = hd - d0 >= 8 ? 8 : hd - d0;
    const int cnt1 = hd - d0 - 8 >= 8 ? 8 : (hd - d0 - 8 > 0 ? hd - d0 - 8 : 0);
    const bool full = cnt1 == 8;
    __m256 acc[NQ][2];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t pp = 0; pp < n_max; ++pp) {
      const uint8_t* row = v + static_cast<size_t>(pp) * rb;
      const __m256 v0 = full ? L::Full(row, d0) : L::Part(row, d0, cnt0);
      const __m256 v1 = full ? L::Full(row, d0 + 8) : L::Part(row, d0 + 8, cnt1);
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) {
        if (pp >= n_pos[i]) continue;
        const __m256 e = _mm256_set1_ps(s[i][pp]);
        acc[i][0] = _mm256_fmadd_ps(e, v0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(e, v1, acc[i][1]);
      }
    }
    for (int i = 0; i < NQ; ++i) {
      _mm256_maskstore_ps(out[i] + d0, FirstLanes(cnt0), _mm256_mul_ps(acc[i][0], inv[i]));
      if (cnt1 > 0)
        _mm256_maskstore_ps(out[i] + d0 + 8, FirstLanes(cnt1), _mm256_mul_ps(acc[i][1], inv[i]));
    }
  }
}

// NQ queries of one head; K/V of that head at kv.k + k_off, kv.v + v_off.
template <int NQ>
void AttentionTile(const float* const* q, const int64_t* n_pos, const KvView& kv, size_t k_off,
                   size_t v_off, float scale, float* const* out, float* const* s) {
  const int hd = kv.head_dim;
  int64_t n_max = 0;
  for (int i = 0; i < NQ; ++i) n_max = n_pos[i] > n_max ? n_pos[i] : n_max;
  WithLoader(kv.k_type, [&](auto l) {
    TileScores<decltype(l), NQ>(q, kv.k + k_off, kv.k_row_bytes, hd, scale, s, n_max);
  });
  __m256 inv[NQ];  // 0 for a query without positions: its output is zeros
  for (int i = 0; i < NQ; ++i)
    inv[i] = _mm256_set1_ps(n_pos[i] > 0 ? 1.0f / ExpAndSum(s[i], n_pos[i]) : 0.0f);
  WithLoader(kv.v_type, [&](auto l) {
    TileSum<decltype(l), NQ>(n_pos, kv.v + v_off, kv.v_row_bytes, hd, s, inv, n_max, out);
  });
}

void AttentionRows(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                   const int64_t* n_pos, float scale, float* out, int64_t ldo, float* scratch) {
  const int hd = kv.head_dim;
  const int group = kv.n_kv_head > 0 && n_head >= kv.n_kv_head ? n_head / kv.n_kv_head : 1;
  const size_t k_head = RowBytes(kv.k_type, hd), v_head = RowBytes(kv.v_type, hd);
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
      const size_t k_off = static_cast<size_t>(h / group) * k_head;
      const size_t v_off = static_cast<size_t>(h / group) * v_head;
      switch (nq) {
        case 4:
          AttentionTile<4>(qs, np, kv, k_off, v_off, scale, os, ss);
          break;
        case 3:
          AttentionTile<3>(qs, np, kv, k_off, v_off, scale, os, ss);
          break;
        case 2:
          AttentionTile<2>(qs, np, kv, k_off, v_off, scale, os, ss);
          break;
        default:
          AttentionTile<1>(qs, np, kv, k_off, v_off, scale, os, ss);
          break;
      }
    }
  }
}

// ------------------------------------------------------------ delta rule

// Columns [c0, c0 + 32) of S (fewer at the tail, masked): 4 vectors of 8.
void DeltaRule(float* s, const float* k, const float* v, const float* q, float decay, float beta,
               int64_t d_k, int64_t d_v, float* delta, float* out) {
  const __m256 vdecay = _mm256_set1_ps(decay), vbeta = _mm256_set1_ps(beta);
  for (int64_t c0 = 0; c0 < d_v; c0 += 32) {
    __m256i m[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t left = d_v - c0 - 8 * j;
      m[j] = avx2::FirstLanes(left >= 8 ? 8 : left > 0 ? left : 0);
    }
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t r = 0; r < d_k; ++r) {
      const float* row = s + r * d_v + c0;
      const __m256 kr = _mm256_set1_ps(k[r]);
      for (int j = 0; j < 4; ++j) {
        acc[j] = _mm256_fmadd_ps(kr, _mm256_maskload_ps(row + 8 * j, m[j]), acc[j]);
      }
    }
    __m256 d[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 vv = _mm256_maskload_ps(v + c0 + 8 * j, m[j]);
      d[j] = _mm256_mul_ps(vbeta, _mm256_sub_ps(vv, _mm256_mul_ps(vdecay, acc[j])));
      _mm256_maskstore_ps(delta + c0 + 8 * j, m[j], d[j]);
      acc[j] = _mm256_setzero_ps();
    }
    for (int64_t r = 0; r < d_k; ++r) {
      float* row = s + r * d_v + c0;
      const __m256 kr = _mm256_set1_ps(k[r]), qr = _mm256_set1_ps(q[r]);
      for (int j = 0; j < 4; ++j) {
        const __m256 old = _mm256_maskload_ps(row + 8 * j, m[j]);
        const __m256 nw = _mm256_fmadd_ps(kr, d[j], _mm256_mul_ps(vdecay, old));
        _mm256_maskstore_ps(row + 8 * j, m[j], nw);
        acc[j] = _mm256_fmadd_ps(qr, nw, acc[j]);
      }
    }
    for (int j = 0; j < 4; ++j) _mm256_maskstore_ps(out + c0 + 8 * j, m[j], acc[j]);
  }
}

int64_t DirectMaxTokens(DType type) {
  switch (type) {
    case DType::kF32:
      return 16;
    case DType::kF16:
    case DType::kBF16:
      return kDirectF16Tokens;
    default:
      return 0;
  }
}

const IsaOps kAvx2Ops = {
    .isa = Isa::kAvx2,
    .gemm = GemmAvx2,
    .direct_max_tokens = DirectMaxTokens,
    .dequant_row = DequantAvx2,
    .qgemm = QGemmAvx2,
    .quantize_q8k = QuantizeQ8KRef,
    .qgemm32 = QGemm32Avx2,
    .quantize_q8_32 = QuantizeQ8_32Ref,
    .f32_to_f16 = F32ToF16Row,
    .f16_to_f32 = F16ToF32Row,
    .sum_squares = SumSquares,
    .scale_mul = ScaleMul,
    .swiglu = SwiGlu,
    .sum_exp = SumExp,
    .max_value = MaxValue,
    .silu = Silu,
    .attention_rows = AttentionRows,
    .attention_scores = nullptr,  // no two-phase attention on this path
    .attention_from_scores = nullptr,
    .delta_rule = DeltaRule,
    .pack_bf16 = nullptr,
    .bgemm = nullptr,
};

}  // namespace

const IsaOps& Avx2Ops() { return kAvx2Ops; }

}  // namespace mx::kernels::internal
