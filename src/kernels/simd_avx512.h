// Internal AVX-512 helpers shared by matmul_avx512.cc and ops_avx512.cc.
// Include only from files compiled with the AVX-512 flags. Everything here has
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

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

namespace mx::kernels::internal::avx512 {
namespace {

// Lanes [0, n) set, n <= 16.
static inline __mmask16 FirstLanes(int64_t n) {
  return static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
}

// Sum of the 16 lanes in one fixed order: halves, then quarters, then pairs.
static inline float HSum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// HSum of four vectors at once: lane j of the result is HSum of the j-th
// argument, bit for bit (the same pairs are added at every level: i + i+8,
// i + i+4, i + i+2, i + i+1), with far fewer shuffles per sum.
static inline __m128 HSum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // Level 1: [a.lo8 + a.hi8 | b.lo8 + b.hi8], [c.. | d..].
  const __m512 ab =
      _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd =
      _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  // Level 2: quarter q holds argument q's lanes i + i+4.
  const __m512 z =
      _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  // Levels 3 and 4 inside each quarter: (l0 + l2) + (l1 + l3) lands in lane 0.
  const __m512 p = _mm512_add_ps(z, _mm512_permute_ps(z, 0x4E));
  const __m512 r = _mm512_add_ps(p, _mm512_permute_ps(p, 0xB1));
  const __m512i idx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, r));
}

static inline float HMax(__m512 v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// e^x per lane, within about 1 ulp of the true value (Cody-Waite reduction
// x = n ln2 + r, degree-7 Taylor polynomial on |r| <= ln2/2, then 2^n applied
// in two steps so subnormal results and overflow to inf come out right).
// NaN stays NaN; -inf gives 0; +inf gives inf. The same operation sequence as
// avx2::Exp, so both paths return identical values.
static inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // NaN in x propagates (second operand)
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147182464599609375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-1.904654323148236e-09f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

// x / (1 + e^-x).
static inline __m512 Silu(__m512 x) {
  const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// Weight loaders: 16 f32 weights of one row at column k (k a multiple of
// 16), full or with only the lanes of `m` (the rest zero).
struct LoadF32 {
  static constexpr int kBytesPer16 = 64;
  static __m512 Full(const uint8_t* row, int64_t k) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static __m512 Part(const uint8_t* row, int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static constexpr int kBytesPer16 = 32;
  static __m512 Full(const uint8_t* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 Part(const uint8_t* row, int64_t k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};
struct LoadBF16 {
  static constexpr int kBytesPer16 = 32;
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Full(const uint8_t* row, int64_t k) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 Part(const uint8_t* row, int64_t k, __mmask16 m) {
    return Widen(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};
// Q8_0: d * q is exact in f32 (11-bit by 8-bit significands).
struct LoadQ8_0 {
  static constexpr int kBytesPer16 = 17;
  static __m512 Full(const uint8_t* row, int64_t k) {
    const uint8_t* block = row + (k >> 5) * 34;
    uint16_t d;
    std::memcpy(&d, block, 2);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + (k & 16)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(_cvtsh_ss(d)));
  }
  // Only the block at k is read, and only when a lane is wanted (a step
  // past the row's end reads nothing).
  static __m512 Part(const uint8_t* row, int64_t k, __mmask16 m) {
    return m == 0 ? _mm512_setzero_ps() : _mm512_maskz_mov_ps(m, Full(row, k));
  }
};
// Q4_0: values 0-15 of a block are the low nibbles of its 16 bytes, values
// 16-31 the high ones; (q - 8) * d is exact in f32.
struct LoadQ4_0 {
  static constexpr int kBytesPer16 = 9;
  static __m512 Full(const uint8_t* row, int64_t k) {
    const uint8_t* block = row + (k >> 5) * 18;
    uint16_t d;
    std::memcpy(&d, block, 2);
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    if (k & 16) q = _mm_srli_epi16(q, 4);
    q = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(q), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(_cvtsh_ss(d)));
  }
  static __m512 Part(const uint8_t* row, int64_t k, __mmask16 m) {
    return m == 0 ? _mm512_setzero_ps() : _mm512_maskz_mov_ps(m, Full(row, k));
  }
};

// ------------------------------------------------- integer kernel helpers

static inline float HalfValue(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
static inline __m512i Broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// Per-16-bit-word shift counts: a in the low 256 bits, b in the high.
static inline __m512i Halves16(short a, short b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(a), _mm256_set1_epi16(b), 1);
}

// Level 1 and 2 of the row tree: 128-bit lane L of the result holds, in
// 32-bit lane j, row j's sum of lane L of z[j] (four rows).
static inline __m512i Rows4(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
// For rows given as [sum part | min part] (256 bits each): lanes 0-7 of
// `s` = each row's sum part total, of `m` = each row's min part total.
template <int RM>
static inline void SumRows(const __m512i (&z)[RM], __m256i* s, __m256i* m) {
  const __m512i zero = _mm512_setzero_si512();
  auto row = [&](int r) { return r < RM ? z[r < RM ? r : 0] : zero; };
  const __m512i lo = Rows4(row(0), row(1), row(2), row(3));
  if constexpr (RM <= 4) {
    // lo = [S part L0, S part L1, M L2, M L3] for rows 0-3.
    const __m512i w = _mm512_add_epi32(lo, _mm512_shuffle_i32x4(lo, lo, 0xB1));
    *s = _mm256_zextsi128_si256(_mm512_castsi512_si128(w));
    *m = _mm256_zextsi128_si256(_mm512_extracti32x4_epi32(w, 2));
  } else {
    const __m512i hi = Rows4(row(4), row(5), row(6), row(7));
    const __m512i w = _mm512_add_epi32(_mm512_shuffle_i32x4(lo, hi, 0x88),
                                       _mm512_shuffle_i32x4(lo, hi, 0xDD));
    // w = [S rows 0-3, M rows 0-3, S rows 4-7, M rows 4-7].
    const __m512i p = _mm512_shuffle_i32x4(w, w, 0xD8);
    *s = _mm512_castsi512_si256(p);
    *m = _mm512_extracti64x4_epi64(p, 1);
  }
}
// [lo 256 + hi 256 of v | extra].
static inline __m512i FoldHalves(__m512i v, __m256i extra) {
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm512_inserti64x4(_mm512_castsi256_si512(h), extra, 1);
}

// d (and dmin) of RM rows' block at byte `offset`: a 32-bit gather, d in the
// low half (Q4_K / Q5_K: dmin in the high half; Q6_K reads bytes 206-209,
// d in the high half).
template <int RM>
static inline __m256i GatherHeads(const uint8_t* b0, size_t row_bytes, int offset) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                         _mm256_set1_epi32(static_cast<int>(row_bytes)));
  const __mmask8 rows = static_cast<__mmask8>((1u << RM) - 1u);
  return _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), rows, idx, b0 + offset, 1);
}
static inline __m256 HalvesToFloats(__m256i words, int high) {
  const __m256i h = high ? _mm256_srli_epi32(words, 16) : words;
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(h));
}

// A thread's 64-byte aligned scratch memory, grown on demand and freed when
// the thread ends (each including file has its own).
struct ScratchMemory {
  void* bytes = nullptr;
  size_t capacity = 0;
  ~ScratchMemory() { ::operator delete[](bytes, std::align_val_t(64)); }
};
static inline void* ThreadScratch(size_t n) {
  thread_local ScratchMemory memory;
  if (memory.capacity < n) {
    ::operator delete[](memory.bytes, std::align_val_t(64));
    memory.bytes = ::operator new[](n, std::align_val_t(64));
    memory.capacity = n;
  }
  return memory.bytes;
}

// In-register transpose of 16 x 16 32-bit lanes: r[i] holds row i on entry,
// column i on exit (the loops unrolled, or GCC keeps t and u on the stack).
__attribute__((always_inline)) static inline void Transpose16x16(__m512* r) {
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

// The same for integer lanes (the casts cost nothing).
__attribute__((always_inline)) static inline void Transpose16x16(__m512i* v) {
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(v[i]);
  Transpose16x16(r);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) v[i] = _mm512_castps_si512(r[i]);
}

}  // namespace
}  // namespace mx::kernels::internal::avx512
