// Internal AVX2 helpers shared by matmul_avx2.cc and ops_avx2.cc. Include
// only from files compiled with the AVX2 flags. Everything here has
// internal linkage (anonymous namespace), see isa.h.
#pragma once

// GCC 12's AVX-512 headers trip -Wuninitialized on their own
// _mm512_undefined_* helpers (GCC bug 105593); silence it for them only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

namespace mx::kernels::internal::avx2 {
namespace {

// Integer mask with lanes [0, n) set (all bits), n <= 8, for maskload/maskstore.
static inline __m256i FirstLanes(int64_t n) {
  static const int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTable + 8 - n));
}

// Sum of the 8 lanes in one fixed order: halves, then pairs.
static inline float HSum(__m256 v) {
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// HSum of four vectors at once: lane j of the result is HSum of the j-th
// argument, bit for bit (the same pairs are added at every level: i + i+4,
// i + i+2, i + i+1), with far fewer shuffles per sum.
static inline __m128 HSum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  // Level 1: [a.lo4 + a.hi4 | b.lo4 + b.hi4], [c.. | d..].
  const __m256 ab =
      _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 cd =
      _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  // Level 2 (i + i+2): half 0 holds a0, a1, c0, c1; half 1 holds b0, b1, d0, d1.
  const __m256 z = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
  // Level 3 (i + i+1): half 0 = a, c, a, c; half 1 = b, d, b, d.
  const __m256 h = _mm256_hadd_ps(z, z);
  const __m128 lo = _mm256_castps256_ps128(h), hi = _mm256_extractf128_ps(h, 1);
  return _mm_unpacklo_ps(lo, hi);
}

static inline float HMax(__m256 v) {
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// e^x per lane; the same operation sequence as avx512::Exp (see there), so
// both paths return identical values.
static inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);  // NaN in x propagates (second operand)
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693147182464599609375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-1.904654323148236e-09f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// x / (1 + e^-x).
static inline __m256 Silu(__m256 x) {
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// Weight loaders: 8 f32 weights of one row at column k (k a multiple of 8),
// full or only the first `count` lanes (the rest zero).
struct LoadF32 {
  static __m256 Full(const uint8_t* row, int64_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static __m256 Part(const uint8_t* row, int64_t k, int64_t count) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + k, FirstLanes(count));
  }
};
// 16-bit tails go through a zeroed copy (AVX2 has no 16-bit masked load).
static inline __m128i LoadHalfsPart(const uint8_t* p, int64_t count) {
  uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(tmp, p, static_cast<size_t>(count) * 2);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp));
}
struct LoadF16 {
  static __m256 Full(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static __m256 Part(const uint8_t* row, int64_t k, int64_t count) {
    return _mm256_cvtph_ps(LoadHalfsPart(row + 2 * k, count));
  }
};
struct LoadBF16 {
  static __m256 Widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 Full(const uint8_t* row, int64_t k) {
    return Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static __m256 Part(const uint8_t* row, int64_t k, int64_t count) {
    return Widen(LoadHalfsPart(row + 2 * k, count));
  }
};
// Q8_0: d * q is exact in f32 (11-bit by 8-bit significands).
struct LoadQ8_0 {
  static __m256 Full(const uint8_t* row, int64_t k) {
    const uint8_t* block = row + (k >> 5) * 34;
    uint16_t d;
    std::memcpy(&d, block, 2);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + (k & 24)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(d)));
  }
  // Only the block at k is read, and only when a lane is wanted (a step
  // past the row's end reads nothing).
  static __m256 Part(const uint8_t* row, int64_t k, int64_t count) {
    if (count <= 0) return _mm256_setzero_ps();
    return _mm256_and_ps(Full(row, k), _mm256_castsi256_ps(FirstLanes(count)));
  }
};
// Q4_0: values 0-15 of a block are the low nibbles of its 16 bytes, values
// 16-31 the high ones; (q - 8) * d is exact in f32.
struct LoadQ4_0 {
  static __m256 Full(const uint8_t* row, int64_t k) {
    const uint8_t* block = row + (k >> 5) * 18;
    uint16_t d;
    std::memcpy(&d, block, 2);
    __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + (k & 8)));
    if (k & 16) q = _mm_srli_epi16(q, 4);
    q = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(q), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(_cvtsh_ss(d)));
  }
  static __m256 Part(const uint8_t* row, int64_t k, int64_t count) {
    if (count <= 0) return _mm256_setzero_ps();
    return _mm256_and_ps(Full(row, k), _mm256_castsi256_ps(FirstLanes(count)));
  }
};

}  // namespace
}  // namespace mx::kernels::internal::avx2
