// AVX-512 matmul: register tiles of up to 4 weight rows x 6 tokens (8 rows x
// 1 token for decode), each accumulator one (row, token) pair with 16 lanes.
//
// Fixed reduction order (batch invariance): for every output element,
//   acc = 0; for k = 0, 16, 32, ...: acc = fma(w[k..k+16), x[k..k+16), acc)
// with the last partial step zero-filled by masks, then HSum(acc). Every tile
// shape runs exactly that per-element sequence, and all weight loaders give
// the exact dequantized f32 values (as quant.cc), so the value of y[t, r]
// never depends on the tile it was computed in.
//
// F32/F16/BF16 weights reach the FMAs through column loaders (Tile).
// Quantized weights run on integers (qmatmul_avx512.cc, qmatmul32_avx512.cc);
// this file keeps their exact conversions to f32 (DequantAvx512, for
// DequantizeRow: embedding rows and the reference tests).
#include "kernels/dequant_blocks.h"
#include "kernels/isa.h"
#include "kernels/simd_avx512.h"
#include "kernels/tile_sweep.h"

namespace mx::kernels::internal {
namespace {

using avx512::FirstLanes;
using avx512::HSum4;
using avx512::LoadBF16;
using avx512::LoadF16;
using avx512::LoadF32;
using avx512::LoadQ8_0;

// Writes the RM x RN accumulators' sums: sums of 4 rows at once (same
// per-element order as HSum); missing rows of a short tile are zero vectors
// whose sums are not stored.
template <int RM, int RN>
inline void StoreTile(const __m512 (&acc)[RM][RN], float* y, int64_t ldy) {
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) {
#pragma GCC unroll 2
    for (int r = 0; r < RM; r += 4) {
      const __m128 s = HSum4(acc[r][t], r + 1 < RM ? acc[r + 1 < RM ? r + 1 : r][t] : zero,
                             r + 2 < RM ? acc[r + 2 < RM ? r + 2 : r][t] : zero,
                             r + 3 < RM ? acc[r + 3 < RM ? r + 3 : r][t] : zero);
      float* out = y + t * ldy + r;
      const int n = RM - r < 4 ? RM - r : 4;
      if (n == 4) {
        _mm_storeu_ps(out, s);
      } else {
        _mm_mask_storeu_ps(out, static_cast<__mmask8>((1u << n) - 1u), s);
      }
    }
  }
}

// One register tile: RM rows (row r at w + r * row_bytes) x RN tokens.
template <class L, int RM, int RN>
void Tile(const uint8_t* w, size_t row_bytes, int64_t n_cols, const float* x, int64_t ldx, float* y,
          int64_t ldy) {
  const uint8_t* rows[RM];
  const float* xs[RN];
  __m512 acc[RM][RN];
#pragma GCC unroll 8
  for (int r = 0; r < RM; ++r) rows[r] = w + static_cast<size_t>(r) * row_bytes;
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) xs[t] = x + t * ldx;
#pragma GCC unroll 8
  for (int r = 0; r < RM; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= n_cols; k += 16) {
    if constexpr (RN <= 2) {
      // Decode streams each weight once: fetch two tiles ahead, a line at a time.
      if ((k * L::kBytesPer16 / 16) % 64 == 0) {
#pragma GCC unroll 8
        for (int r = 0; r < RM; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + 2 * RM * row_bytes +
                                                     k * L::kBytesPer16 / 16),
                       _MM_HINT_T0);
        }
      }
    }
    __m512 xv[RN];
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) xv[t] = _mm512_loadu_ps(xs[t] + k);
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const __m512 wv = L::Full(rows[r], k);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (k < n_cols) {
    const __mmask16 m = FirstLanes(n_cols - k);
    __m512 xv[RN];
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) xv[t] = _mm512_maskz_loadu_ps(m, xs[t] + k);
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const __m512 wv = L::Part(rows[r], k, m);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  StoreTile<RM, RN>(acc, y, ldy);
}

// Column-loader tiles (weights converted 16 values at a time).
template <class L>
struct Cols {
  template <int RM, int RN>
  static void Run(const uint8_t* w, size_t row_bytes, int64_t n_cols, const float* x, int64_t ldx,
                  float* y, int64_t ldy) {
    Tile<L, RM, RN>(w, row_bytes, n_cols, x, ldx, y, ldy);
  }
};

static inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
static inline __m512 IntsToFloats(__m128i bytes) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
}
static inline __m128i LowNibbles(__m128i b) { return _mm_and_si128(b, _mm_set1_epi8(0x0F)); }
static inline __m128i HighNibbles(__m128i b) {
  return _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
}
static inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Block loaders for DequantAvx512: Prepare() reads a block's scales once,
// Vec(block, head, v) returns values [16 v, 16 v + 16) of the block as the
// exact f32 numbers dequant_blocks.h computes (same operations, same order).
//
// 4- and 5-bit types look their values up in a per-(block, scale) table of
// the 16 (32) possible values, built with dequant_blocks.h's expression:
// vpermps / vpermt2ps use only the low 4 (5) index bits, so a zero-extended
// byte indexes its low nibble directly and a shifted one its high nibble.

// [0, 1, ..., 15] and [16, ..., 31] as floats and ints.
static inline __m512 Iota() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
static inline __m512 Iota16() {
  return _mm512_setr_ps(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}
// 16 bytes at p zero-extended to 32-bit lanes.
static inline __m512i Bytes(const uint8_t* p) { return _mm512_cvtepu8_epi32(Load16(p)); }
// Lane i: the low (v even) or high (v odd) nibble of byte i in bits 0..3
// (the low-nibble form leaves the high nibble in bits 4..7).
static inline __m512i NibbleIndex(__m512i bytes, int high) {
  return high ? _mm512_srli_epi32(bytes, 4) : bytes;
}

struct BlockQ4_0 {
  static constexpr int kValues = 32, kBytes = 18, kVecs = 2;
  struct Head {
    __m512 table;  // (i - 8) * d
  };
  static Head Prepare(const uint8_t* b) {
    const __m512 q = _mm512_sub_ps(Iota(), _mm512_set1_ps(8.0f));  // exact
    return {_mm512_mul_ps(q, _mm512_set1_ps(HalfAt(b)))};
  }
  static __m512 Vec(const uint8_t* b, const Head& h, int v) {
    return _mm512_permutexvar_ps(NibbleIndex(Bytes(b + 2), v), h.table);
  }
};
struct BlockQ4_1 {
  static constexpr int kValues = 32, kBytes = 20, kVecs = 2;
  struct Head {
    __m512 table;  // i * d + m
  };
  static Head Prepare(const uint8_t* b) {
    return {_mm512_add_ps(_mm512_mul_ps(Iota(), _mm512_set1_ps(HalfAt(b))),
                          _mm512_set1_ps(HalfAt(b + 2)))};
  }
  static __m512 Vec(const uint8_t* b, const Head& h, int v) {
    return _mm512_permutexvar_ps(NibbleIndex(Bytes(b + 4), v), h.table);
  }
};
// Q5_0 (kHasMin false) / Q5_1: bit j of qh is value j's fifth bit.
template <bool kHasMin>
struct BlockQ5 {
  static constexpr int kValues = 32, kBytes = kHasMin ? 24 : 22, kVecs = 2;
  struct Head {
    __m512 lo, hi;  // values of q = 0..15 and 16..31
    uint32_t qh;
  };
  static __m512 Values(__m512 q, __m512 d, __m512 m) {
    if (kHasMin) return _mm512_add_ps(_mm512_mul_ps(q, d), m);                // q * d + m
    return _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(16.0f)), d);  // (q - 16) * d
  }
  static Head Prepare(const uint8_t* b) {
    Head h;
    const __m512 d = _mm512_set1_ps(HalfAt(b));
    const __m512 m = kHasMin ? _mm512_set1_ps(HalfAt(b + 2)) : _mm512_setzero_ps();
    h.lo = Values(Iota(), d, m);
    h.hi = Values(Iota16(), d, m);
    std::memcpy(&h.qh, b + (kHasMin ? 4 : 2), 4);
    return h;
  }
  static __m512 Vec(const uint8_t* b, const Head& h, int v) {
    const __m512i bytes = Bytes(b + (kHasMin ? 8 : 6));
    const __m512i nib = v == 0 ? _mm512_and_si512(bytes, _mm512_set1_epi32(15))
                               : _mm512_srli_epi32(bytes, 4);
    const __mmask16 fifth = static_cast<__mmask16>(h.qh >> (16 * v));
    const __m512i idx = _mm512_mask_or_epi32(nib, fifth, nib, _mm512_set1_epi32(16));
    return _mm512_permutex2var_ps(h.lo, idx, h.hi);
  }
};
// Q4_K (kFive false) / Q5_K: value 16 v + i lies in 64-chunk c = v / 4,
// nibble half (v / 2) % 2, byte offset 16 (v % 2) + i; sub-block s = v / 2;
// x = (d * sc_s) * q - dmin * m_s.
template <bool kFive>
struct BlockQxK {
  static constexpr int kValues = 256, kBytes = kFive ? 176 : 144, kVecs = 16;
  struct Head {
    float ds[8], dm[8];
  };
  static Head Prepare(const uint8_t* b) {
    Head h;
    // The 8 six-bit scales and mins (dequant_blocks.h KScalesMinsOf).
    const KScalesMins k = KScalesMinsOf(b);
    const uint64_t sc = k.sc, m = k.m;
    auto floats = [](uint64_t bytes) {
      return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes))));
    };
    _mm256_storeu_ps(h.ds, _mm256_mul_ps(_mm256_set1_ps(HalfAt(b)), floats(sc)));
    _mm256_storeu_ps(h.dm, _mm256_mul_ps(_mm256_set1_ps(HalfAt(b + 2)), floats(m)));
    return h;
  }
  static __m512 Table(const Head& h, int s, __m512 q) {
    return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(h.ds[s]), q), _mm512_set1_ps(h.dm[s]));
  }
  static __m512 Vec(const uint8_t* b, const Head& h, int v) {
    const int c = v >> 2, s = v >> 1, part = v & 1;
    const __m512i bytes = Bytes(b + (kFive ? 48 : 16) + 32 * c + 16 * part);
    if (!kFive) return _mm512_permutexvar_ps(NibbleIndex(bytes, s & 1), Table(h, s, Iota()));
    const __m512i nib = (s & 1) == 0 ? _mm512_and_si512(bytes, _mm512_set1_epi32(15))
                                     : _mm512_srli_epi32(bytes, 4);
    const __m128i qh = Load16(b + 16 + 16 * part);
    const __mmask16 fifth = _mm_test_epi8_mask(qh, _mm_set1_epi8(static_cast<char>(1u << s)));
    const __m512i idx = _mm512_mask_or_epi32(nib, fifth, nib, _mm512_set1_epi32(16));
    return _mm512_permutex2var_ps(Table(h, s, Iota()), idx, Table(h, s, Iota16()));
  }
};
// Q8_0: d * q (exact), d read once per block.
struct BlockQ8_0 {
  static constexpr int kValues = 32, kBytes = 34, kVecs = 2;
  struct Head {
    __m512 d;
  };
  static Head Prepare(const uint8_t* b) { return {_mm512_set1_ps(HalfAt(b))}; }
  static __m512 Vec(const uint8_t* b, const Head& h, int v) {
    const __m512i q = _mm512_cvtepi8_epi32(Load16(b + 2 + 16 * v));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), h.d);
  }
};
// Q6_K: value 128 n + 32 k + 16 half + i (vector v = 8 n + 2 k + half, which
// shares scale v) has its low 4 bits in nibble k / 2 of ql byte
// 64 n + 32 (k % 2) + 16 half + i and its high 2 bits at bit 2 k of qh byte
// 32 n + 16 half + i; x = (d * sc_v) * (q - 32). Prepare unpacks the whole
// block's q - 32 as bytes with 512-bit operations (a few per 64 values), so
// a vector costs a widening load, a conversion and the scale.
struct BlockQ6K {
  static constexpr int kValues = 256, kBytes = 210, kVecs = 16;
  struct Head {
    alignas(64) int8_t q[256];  // q - 32 of every value, in value order
    float ds[16];
  };
  static Head Prepare(const uint8_t* b) {
    Head h;
    // ds[i] = d * sc[i], the 16 at once (the same float products).
    _mm512_storeu_ps(h.ds, _mm512_mul_ps(_mm512_set1_ps(HalfAt(b + 208)),
                                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(b + 192)))));
    const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(0x03);
    const __m512i bias = _mm512_set1_epi8(32);
    // Bytes 0-31 of a 64-byte ql run take qh bits (0, 1) / (4, 5), bytes 32-63
    // bits (2, 3) / (6, 7) of the same 32 qh bytes: per-word shift counts.
    const __m512i shift_lo = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    const __m512i shift_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    for (int n = 0; n < 2; ++n) {
      const __m512i ql = _mm512_loadu_si512(b + 64 * n);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * n)));
      const __m512i hi_lo = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_lo), low2), 4);
      const __m512i hi_hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_hi), low2), 4);
      const __m512i q_lo = _mm512_or_si512(_mm512_and_si512(ql, low4), hi_lo);
      const __m512i q_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hi_hi);
      _mm512_store_si512(h.q + 128 * n, _mm512_sub_epi8(q_lo, bias));
      _mm512_store_si512(h.q + 128 * n + 64, _mm512_sub_epi8(q_hi, bias));
    }
    return h;
  }
  static __m512 Vec(const uint8_t*, const Head& h, int v) {
    const __m512i qi = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(h.q + 16 * v)));
    return _mm512_mul_ps(_mm512_set1_ps(h.ds[v]), _mm512_cvtepi32_ps(qi));
  }
};

// One product's register tiles for SweepTiles (tile_sweep.h).
template <class K>
struct Tiles {
  const uint8_t* w;
  size_t row_bytes;
  int64_t n_cols;
  const float* x;
  int64_t ldx;
  float* y;
  int64_t ldy;
  template <int RM, int RN>
  void Run(int64_t r, int64_t t) const {
    K::template Run<RM, RN>(w + static_cast<size_t>(r) * row_bytes, row_bytes, n_cols, x + t * ldx,
                            ldx, y + t * ldy + r, ldy);
  }
};
template <class K, int kMaxTokens>
void Sweep(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols, const float* x,
           int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  SweepTiles<kMaxTokens>(n_rows, n_tokens, Tiles<K>{w, row_bytes, n_cols, x, ldx, y, ldy});
}

// fp16 scales through F16C (never core/fp16.h's inline functions, see isa.h).
struct F16cCvt {
  static float Half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }
};

// Direct (unconverted) weights other than F32 run up to this many tokens.
constexpr int kDirectTokens = 6;

// n values of block type B converted with the block loaders (the same exact
// values as dequant_blocks.h).
template <class B>
bool DequantWith(const uint8_t* src, float* dst, int64_t n) {
  if (n % B::kValues != 0) return false;
  for (int64_t ib = 0; ib < n / B::kValues; ++ib) {
    const uint8_t* b = src + ib * B::kBytes;
    const typename B::Head h = B::Prepare(b);
    float* out = dst + ib * B::kValues;
#pragma GCC unroll 16
    for (int v = 0; v < B::kVecs; ++v) _mm512_storeu_ps(out + 16 * v, B::Vec(b, h, v));
  }
  return true;
}

}  // namespace

bool GemmAvx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  switch (type) {
    case DType::kF32:
      Sweep<Cols<LoadF32>, 6>(w, row_bytes, n_rows, n_cols, x, ldx, n_tokens, y, ldy);
      return true;
    case DType::kF16:
      Sweep<Cols<LoadF16>, kDirectTokens>(w, row_bytes, n_rows, n_cols, x, ldx, n_tokens, y, ldy);
      return true;
    case DType::kBF16:
      Sweep<Cols<LoadBF16>, kDirectTokens>(w, row_bytes, n_rows, n_cols, x, ldx, n_tokens, y, ldy);
      return true;
    default:
      return false;
  }
}

// Exact conversions to f32 for DequantizeRow (and the f32 panels of F16/BF16).
bool DequantAvx512(DType type, const uint8_t* src, float* dst, int64_t n) {
  int64_t k = 0;
  switch (type) {
    case DType::kF16:
      for (; k + 16 <= n; k += 16) _mm512_storeu_ps(dst + k, LoadF16::Full(src, k));
      if (k < n)
        _mm512_mask_storeu_ps(dst + k, FirstLanes(n - k), LoadF16::Part(src, k, FirstLanes(n - k)));
      return true;
    case DType::kBF16:
      for (; k + 16 <= n; k += 16) _mm512_storeu_ps(dst + k, LoadBF16::Full(src, k));
      if (k < n)
        _mm512_mask_storeu_ps(dst + k, FirstLanes(n - k),
                              LoadBF16::Part(src, k, FirstLanes(n - k)));
      return true;
    case DType::kQ8_0:
      if (n % 32 != 0) return false;
      for (; k < n; k += 16) _mm512_storeu_ps(dst + k, LoadQ8_0::Full(src, k));
      return true;
    case DType::kQ4_0:
      return DequantWith<BlockQ4_0>(src, dst, n);
    case DType::kQ4_1:
      return DequantWith<BlockQ4_1>(src, dst, n);
    case DType::kQ5_0:
      return DequantWith<BlockQ5<false>>(src, dst, n);
    case DType::kQ5_1:
      return DequantWith<BlockQ5<true>>(src, dst, n);
    case DType::kQ4_K:
      return DequantWith<BlockQxK<false>>(src, dst, n);
    case DType::kQ5_K:
      return DequantWith<BlockQxK<true>>(src, dst, n);
    case DType::kQ6_K:
      return DequantWith<BlockQ6K>(src, dst, n);
    default:
      break;
  }
  // Other block types: dequant_blocks.h compiled for this instruction set.
  return DequantBlocks<F16cCvt>(static_cast<uint32_t>(type), src, dst, n);
}

}  // namespace mx::kernels::internal
