// AVX-512 path for the vector kernels: KV row conversion (F16C, RNE), RMS
// norm sums, SwiGLU / SiLU with a SIMD exp and the delta rule (attention:
// attention_avx512.cc). Tails run through the same vector code with masks, so
// an element's value never depends on where it sits in the array.
#include <cmath>

#include "kernels/isa.h"
#include "kernels/simd_avx512.h"

namespace mx::kernels::internal {
namespace {

using avx512::FirstLanes;

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

// f32 terms summed in double: each step adds its low and high 8 lanes to
// two accumulators, which are then added lane-wise and across.
struct DoubleSum {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  void Add(__m512 v) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  }
  double Total() const { return HSumPd(_mm512_add_pd(lo, hi)); }
};

double SumSquares(const float* x, int64_t n) {
  DoubleSum sum;
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v =
        n - i >= 16 ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(FirstLanes(n - i), x + i);
    sum.Add(_mm512_mul_ps(v, v));
  }
  return sum.Total();
}

float MaxValue(const float* x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    // Only lanes above the running max (NaN compares false).
    mx = _mm512_mask_mov_ps(mx, _mm512_mask_cmp_ps_mask(m, v, mx, _CMP_GT_OQ), v);
  }
  return avx512::HMax(mx);
}

double SumExp(const float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  DoubleSum sum;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : FirstLanes(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    // Lanes past n and NaN lanes add 0.
    const __mmask16 keep = _mm512_mask_cmp_ps_mask(m, v, v, _CMP_ORD_Q);
    sum.Add(_mm512_maskz_mov_ps(keep, avx512::Exp(_mm512_sub_ps(v, s))));
  }
  return sum.Total();
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

// Measured on the 2-core Xeon: F16/BF16 convert in registers faster than
// through a panel at every batch size; F32 panels win above ~16 tokens
// (aligned loads). (Quantized weights never reach gemm: integer path.)
// ------------------------------------------------------------ delta rule

// Columns [c0, c0 + 64) of S (fewer at the tail, masked): 4 vectors of 16.
void DeltaRule(float* s, const float* k, const float* v, const float* q, float decay, float beta,
               int64_t d_k, int64_t d_v, float* delta, float* out) {
  const __m512 vdecay = _mm512_set1_ps(decay), vbeta = _mm512_set1_ps(beta);
  for (int64_t c0 = 0; c0 < d_v; c0 += 64) {
    __mmask16 m[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t left = d_v - c0 - 16 * j;
      m[j] = left >= 16 ? static_cast<__mmask16>(0xFFFF) : left > 0 ? FirstLanes(left) : 0;
    }
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    for (int64_t r = 0; r < d_k; ++r) {
      const float* row = s + r * d_v + c0;
      const __m512 kr = _mm512_set1_ps(k[r]);
      for (int j = 0; j < 4; ++j) {
        acc[j] = _mm512_fmadd_ps(kr, _mm512_maskz_loadu_ps(m[j], row + 16 * j), acc[j]);
      }
    }
    __m512 d[4];
    for (int j = 0; j < 4; ++j) {
      const __m512 vv = _mm512_maskz_loadu_ps(m[j], v + c0 + 16 * j);
      d[j] = _mm512_mul_ps(vbeta, _mm512_sub_ps(vv, _mm512_mul_ps(vdecay, acc[j])));
      _mm512_mask_storeu_ps(delta + c0 + 16 * j, m[j], d[j]);
      acc[j] = _mm512_setzero_ps();
    }
    for (int64_t r = 0; r < d_k; ++r) {
      float* row = s + r * d_v + c0;
      const __m512 kr = _mm512_set1_ps(k[r]), qr = _mm512_set1_ps(q[r]);
      for (int j = 0; j < 4; ++j) {
        const __m512 old = _mm512_maskz_loadu_ps(m[j], row + 16 * j);
        const __m512 nw = _mm512_fmadd_ps(kr, d[j], _mm512_mul_ps(vdecay, old));
        _mm512_mask_storeu_ps(row + 16 * j, m[j], nw);
        acc[j] = _mm512_fmadd_ps(qr, nw, acc[j]);
      }
    }
    for (int j = 0; j < 4; ++j) _mm512_mask_storeu_ps(out + c0 + 16 * j, m[j], acc[j]);
  }
}

int64_t DirectMaxTokens(DType type) {
  switch (type) {
    case DType::kF32:
      return 16;
    case DType::kF16:
    case DType::kBF16:
      return INT64_MAX;
    default:
      return 0;
  }
}

const IsaOps kAvx512Ops = {
    .isa = Isa::kAvx512,
    .gemm = GemmAvx512,
    .direct_max_tokens = DirectMaxTokens,
    .dequant_row = DequantAvx512,
    .qgemm = QGemmAvx512,
    .quantize_q8k = QuantizeQ8KAvx512,
    .qgemm32 = QGemm32Avx512,
    .quantize_q8_32 = QuantizeQ8_32Avx512,
    .f32_to_f16 = F32ToF16Row,
    .f16_to_f32 = F16ToF32Row,
    .sum_squares = SumSquares,
    .scale_mul = ScaleMul,
    .swiglu = SwiGlu,
    .sum_exp = SumExp,
    .max_value = MaxValue,
    .silu = Silu,
    .attention_rows = AttentionRowsAvx512,
    .attention_scores = AttentionScoresAvx512,
    .attention_from_scores = AttentionFromScoresAvx512,
    .delta_rule = DeltaRule,
    .pack_bf16 = nullptr,
    .bgemm = nullptr,
};

}  // namespace

const IsaOps& Avx512Ops() { return kAvx512Ops; }

}  // namespace mx::kernels::internal
