// AVX2 kernels of the integer K-quant path: qdot_blocks.h's arithmetic, the
// same bits. One row block is unpacked to bytes once (32 values, one Q4_K /
// Q5_K sub-block or two Q6_K ones, per vector) and dotted with up to
// kTokens tokens: vpmaddubsw (u8 x s8, pairs to int16, exact), vpmaddwd with
// the sub-block scales (int32, exact), a horizontal integer sum, then the
// block's f32 step of qdot_blocks.h for that (row, token).
#include "kernels/dequant_blocks.h"
#include "kernels/isa.h"
#include "kernels/lowbit_tables.h"
#include "kernels/simd_avx2.h"

namespace mx::kernels::internal {
namespace {

constexpr int kQ4K = 12, kQ5K = 13, kQ6K = 14;
template <int kType>
constexpr int kBlockBytes = kType == kQ4K ? 144 : (kType == kQ5K ? 176 : 210);
constexpr int kTokens = 16;  // tokens sharing one unpacked row block

static inline float HalfValue(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
static inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
static inline int32_t SumLanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// One row's block, unpacked: 8 vectors of 32 values (value order) and the
// int16 scale vector of each.
struct RowBlock {
  __m256i q[8];
  __m256i sc[8];
  __m256i mins;  // Q4_K / Q5_K: m_j twice (against the 16 bsums); Q6_K: the 16 scales
  float d, dmin;
};

template <int kType>
static inline void Unpack(const uint8_t* b, RowBlock* rb) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (kType == kQ6K) {
    const __m256i low2 = _mm256_set1_epi8(0x03);
    for (int n = 0; n < 2; ++n) {
      const __m256i ql0 = Load32(b + 64 * n), ql1 = Load32(b + 64 * n + 32);
      const __m256i qh = Load32(b + 128 + 32 * n);
      auto high = [&](int shift) {
        return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), low2), 4);
      };
      rb->q[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), high(0));
      rb->q[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), high(2));
      rb->q[4 * n + 2] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high(4));
      rb->q[4 * n + 3] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high(6));
    }
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int v = 0; v < 8; ++v) {
      rb->sc[v] = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * v]), _mm_set1_epi16(sc[2 * v + 1]));
    }
    rb->mins = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
    rb->d = HalfValue(b + 208);
    rb->dmin = 0.0f;
    return;
  }
  const KScalesMins k = KScalesMinsOf(b);
  const uint64_t sc = k.sc, m = k.m;
  const uint8_t* qs = b + (kType == kQ5K ? 48 : 16);
  const __m256i qh = kType == kQ5K ? Load32(b + 16) : _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i raw = Load32(qs + 32 * c);
    __m256i lo = _mm256_and_si256(raw, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
    if constexpr (kType == kQ5K) {
      const __m256i one = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(
          lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
      hi = _mm256_or_si256(
          hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
    }
    rb->q[2 * c] = lo;
    rb->q[2 * c + 1] = hi;
  }
  for (int j = 0; j < 8; ++j)
    rb->sc[j] = _mm256_set1_epi16(static_cast<short>((sc >> (8 * j)) & 0xFF));
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  rb->mins =
      _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m)), dup));
  rb->d = HalfValue(b);
  rb->dmin = HalfValue(b + 2);
}

// The block step of one (row, token).
template <int kType>
static inline float Step(const RowBlock& rb, const Q8KBlock& x, float acc) {
  __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) {
    const __m256i p =
        _mm256_maddubs_epi16(rb.q[v], Load32(reinterpret_cast<const uint8_t*>(x.q) + 32 * v));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, rb.sc[v]));
  }
  const __m256i bs = Load32(reinterpret_cast<const uint8_t*>(x.bsums));
  const __m256i mins = _mm256_madd_epi16(rb.mins, bs);
  if constexpr (kType == kQ6K) {
    const int32_t s = SumLanes(_mm256_sub_epi32(sum, _mm256_slli_epi32(mins, 5)));
    return __builtin_fmaf(x.d * rb.d, static_cast<float>(s), acc);
  } else {
    const int32_t s = SumLanes(sum), m = SumLanes(mins);
    acc = __builtin_fmaf(x.d * rb.d, static_cast<float>(s), acc);
    return __builtin_fmaf(-(x.d * rb.dmin), static_cast<float>(m), acc);
  }
}

template <int kType>
void QSweep(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks, const Q8KBlock* a,
            int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  constexpr int kBytes = kBlockBytes<kType>;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(n_tokens - t0 < kTokens ? n_tokens - t0 : kTokens);
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
      float acc[kTokens] = {};
      for (int64_t ib = 0; ib < n_blocks; ++ib) {
        _mm_prefetch(reinterpret_cast<const char*>(row + row_bytes + ib * kBytes), _MM_HINT_T0);
        RowBlock rb;
        Unpack<kType>(row + ib * kBytes, &rb);
        for (int t = 0; t < nt; ++t) acc[t] = Step<kType>(rb, a[(t0 + t) * lda + ib], acc[t]);
      }
      for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r] = acc[t];
    }
  }
}

// ------------------------------------------------- 32-value block types

constexpr int kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kIQ4NL = 20;
// Types whose values stay signed (multiplied by the sign trick): Q8_0, and
// IQ4_NL (Q4_0's layout, each nibble through the kValuesIq4nl table).
template <int kType>
constexpr bool kSigned32 = kType == kQ8_0 || kType == kIQ4NL;

// One row's block: Q8_0 keeps its signed values (multiplied by the sign
// trick: |q| times a with q's sign, pairs within int16), the others their
// unsigned u (value u - o).
struct RowBlock32 {
  __m256i q;
  float d, m;
};
template <int kType>
static inline RowBlock32 Unpack32(const uint8_t* b) {
  RowBlock32 rb;
  rb.d = HalfValue(b);
  rb.m = 0.0f;
  if constexpr (kType == kQ8_0) {
    rb.q = Load32(b + 2);
    return rb;
  }
  if constexpr (kType == kIQ4NL) {
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIq4nl));
    rb.q = _mm256_setr_m128i(_mm_shuffle_epi8(table, _mm_and_si128(qs, low4)),
                             _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(qs, 4), low4)));
    return rb;
  }
  constexpr bool has_min = kType == kQ4_1 || kType == kQ5_1;
  constexpr bool five = kType == kQ5_0 || kType == kQ5_1;
  if (has_min) rb.m = HalfValue(b + 2);
  const __m128i qs = _mm_loadu_si128(
      reinterpret_cast<const __m128i*>(b + (five ? (has_min ? 8 : 6) : (has_min ? 4 : 2))));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  __m256i u =
      _mm256_setr_m128i(_mm_and_si128(qs, low4), _mm_and_si128(_mm_srli_epi16(qs, 4), low4));
  if constexpr (five) {
    uint32_t qh;
    std::memcpy(&qh, b + (has_min ? 4 : 2), 4);
    // Byte j takes bit j of qh: spread the 4 bytes over their 8-byte groups, test one bit each.
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    u = _mm256_or_si256(u, _mm256_and_si256(set, _mm256_set1_epi8(16)));
  }
  rb.q = u;
  return rb;
}
// Lane r: the sum of the 8 lanes of v[r] (exact integers; 8 rows).
static inline __m256i SumRows8(const __m256i (&v)[8]) {
  const __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
  // ab = [rows 0-3 low halves | rows 0-3 high halves], cd the same for rows 4-7.
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20),
                          _mm256_permute2x128_si256(ab, cd, 0x31));
}

// 8 rows (the last group may have fewer; missing rows repeat row 0 and are
// not stored) x all tokens, rows in the lanes of one accumulator per token.
template <int kType>
void Rows8x32(const uint8_t* w, size_t row_bytes, int rows, int64_t n_blocks, const Q8Block32* a,
              int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  constexpr int kB =
      kType == kQ8_0 || kType == kIQ4NL
          ? (kType == kQ8_0 ? 34 : 18)
          : (kType == kQ4_0 ? 18 : (kType == kQ4_1 ? 20 : (kType == kQ5_0 ? 22 : 24)));
  constexpr bool has_min = kType == kQ4_1 || kType == kQ5_1;
  constexpr int o = kType == kQ4_0 ? 8 : (kType == kQ5_0 ? 16 : 0);
  alignas(32) int32_t off[8];
  for (int r = 0; r < 8; ++r)
    off[r] = r < rows ? static_cast<int32_t>(static_cast<size_t>(r) * row_bytes) : 0;
  const __m256i offsets = _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(n_tokens - t0 < kTokens ? n_tokens - t0 : kTokens);
    __m256 acc[kTokens];
    for (int t = 0; t < nt; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n_blocks; ++ib) {
      const uint8_t* b0 = w + ib * kB;
      __m256i q[8];
      for (int r = 0; r < 8; ++r)
        q[r] = Unpack32<kType>(b0 + (r < rows ? static_cast<size_t>(r) * row_bytes : 0)).q;
      const __m256i heads = _mm256_i32gather_epi32(reinterpret_cast<const int*>(b0), offsets, 1);
      const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
          _mm256_shuffle_epi8(
              heads, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0,
                                      1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1)),
          _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7))));
      __m256 m = _mm256_setzero_ps();
      if constexpr (has_min) {
        m = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
            _mm256_shuffle_epi8(heads, _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1,
                                                        -1, -1, -1, -1, 2, 3, 6, 7, 10, 11, 14, 15,
                                                        -1, -1, -1, -1, -1, -1, -1, -1)),
            _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7))));
      }
      for (int t = 0; t < nt; ++t) {
        const Q8Block32& x = a[(t0 + t) * lda + ib];
        const __m256i xa = Load32(reinterpret_cast<const uint8_t*>(x.q));
        __m256i p[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
          const __m256i pairs =
              kSigned32<kType>
                  ? _mm256_maddubs_epi16(_mm256_sign_epi8(q[r], q[r]), _mm256_sign_epi8(xa, q[r]))
                  : _mm256_maddubs_epi16(q[r], xa);
          p[r] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        }
        const __m256i s = _mm256_sub_epi32(SumRows8(p), _mm256_set1_epi32(o * x.sum));
        const __m256 dx = _mm256_set1_ps(x.d);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(s), acc[t]);
        if constexpr (has_min) {
          acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, m), _mm256_set1_ps(static_cast<float>(x.sum)),
                                   acc[t]);
        }
      }
    }
    for (int t = 0; t < nt; ++t) {
      alignas(32) float out[8];
      _mm256_store_ps(out, acc[t]);
      for (int r = 0; r < rows; ++r) y[(t0 + t) * ldy + r] = out[r];
    }
  }
}

template <int kType>
void Sweep32(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
             const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; r += 8) {
    const int rows = static_cast<int>(n_rows - r < 8 ? n_rows - r : 8);
    Rows8x32<kType>(w + static_cast<size_t>(r) * row_bytes, row_bytes, rows, n_blocks, a, lda,
                    n_tokens, y + r, ldy);
  }
}

}  // namespace

void QGemm32Avx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                 const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  switch (type) {
    case DType::kQ8_0:
      return Sweep32<kQ8_0>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kIQ4_NL:
      return Sweep32<kIQ4NL>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ4_0:
      return Sweep32<kQ4_0>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ4_1:
      return Sweep32<kQ4_1>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ5_0:
      return Sweep32<kQ5_0>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ5_1:
      return Sweep32<kQ5_1>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    default:
      return LowbitQGemm32Avx2(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
  }
}

void QGemmAvx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
               const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  switch (type) {
    case DType::kQ4_K:
      return QSweep<kQ4K>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ5_K:
      return QSweep<kQ5K>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ6_K:
      return QSweep<kQ6K>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    default:
      return LowbitQGemmAvx2(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
  }
}

}  // namespace mx::kernels::internal
