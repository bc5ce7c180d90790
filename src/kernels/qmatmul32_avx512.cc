// AVX-512 (BW + VNNI) kernels of the integer path for the 32-value block
// types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): qdot_blocks.h QDotRow32's
// arithmetic, the same bits. Weights become unsigned bytes (u, value u - o),
// so vpdpbusd multiplies them with the token's int8 activations exactly.
//
// Decode tiles (up to 8 rows x 4 tokens) take two blocks per 64-byte vector
// and sum each row's lanes with the transpose-and-add tree of
// simd_avx512.h (rows in the lanes of one vector per block). Prompts (12
// tokens or more) pack 16-row panels with dword k of the 16 rows side by
// side, so one vpdpbusd covers 4 values x 16 rows of one token and no
// horizontal sum is needed; a tile covers two panels x 4 tokens (each weight
// load feeds 4 tokens, each broadcast 2 panels). Either way a block's S is an exact integer and
// its f32 step is the same, so the tiling never changes a result.
#include "kernels/isa.h"
#include "kernels/lowbit_tables.h"
#include "kernels/qroute_avx512.h"
#include "kernels/simd_avx512.h"

namespace mx::kernels::internal {
namespace {

using avx512::FirstLanes;
using avx512::GatherHeads;
using avx512::HalvesToFloats;
using avx512::SumRows;

// IQ4_NL has Q4_0's layout; its nibbles go through the kValuesIq4nl table,
// plus 128 (unsigned, offset 128 as Q8_0's).
constexpr int kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kIQ4NL = 20;
template <int kType>
constexpr int kBytes32 = kType == kQ8_0
                             ? 34
                             : (kType == kQ4_0 || kType == kIQ4NL
                                    ? 18
                                    : (kType == kQ4_1 ? 20 : (kType == kQ5_0 ? 22 : 24)));
template <int kType>
constexpr int kOffset = kType == kQ8_0 || kType == kIQ4NL
                            ? 128
                            : (kType == kQ4_0 ? 8 : (kType == kQ5_0 ? 16 : 0));
template <int kType>
constexpr int kOffsetShift = kType == kQ8_0 || kType == kIQ4NL
                                 ? 7
                                 : (kType == kQ4_0 ? 3 : 4);  // log2 of kOffset
template <int kType>
constexpr bool kHasMin = kType == kQ4_1 || kType == kQ5_1;
template <int kType>
constexpr bool kFive = kType == kQ5_0 || kType == kQ5_1;
// Byte offset of the packed values in a block.
template <int kType>
constexpr int kQs = kType == kQ8_0
                        ? 2
                        : (kFive<kType> ? (kHasMin<kType> ? 8 : 6) : (kHasMin<kType> ? 4 : 2));

static inline __m256i Load32B(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
static inline __m128i Load16B(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The unsigned values of blocks b0 and b1 (bytes 0-31: b0's values in
// order, 32-63: b1's). b1 may equal b0 (an odd last block; its half unused).
template <int kType>
static inline __m512i Values2(const uint8_t* b0, const uint8_t* b1) {
  if constexpr (kType == kQ8_0) {
    const __m512i q =
        _mm512_inserti64x4(_mm512_castsi256_si512(Load32B(b0 + 2)), Load32B(b1 + 2), 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));  // q + 128
  } else {
    // 128-bit lanes: [b0 qs, b0 qs, b1 qs, b1 qs] >> [0, 4, 0, 4], low nibbles.
    const __m256i lo = _mm256_broadcastsi128_si256(Load16B(b0 + kQs<kType>));
    const __m256i hi = _mm256_broadcastsi128_si256(Load16B(b1 + kQs<kType>));
    const __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                            0x0004000400040004LL, 0x0004000400040004LL);
    __m512i u = _mm512_and_si512(_mm512_srlv_epi16(raw, shift), _mm512_set1_epi8(0x0F));
    if constexpr (kFive<kType>) {
      uint32_t h0, h1;
      std::memcpy(&h0, b0 + (kHasMin<kType> ? 4 : 2), 4);
      std::memcpy(&h1, b1 + (kHasMin<kType> ? 4 : 2), 4);
      const __mmask64 fifth = static_cast<__mmask64>(h0) | (static_cast<__mmask64>(h1) << 32);
      u = _mm512_or_si512(u, _mm512_maskz_mov_epi8(fifth, _mm512_set1_epi8(16)));
    }
    if constexpr (kType == kIQ4NL) {
      alignas(16) uint8_t biased[16];
      for (int k = 0; k < 16; ++k) biased[k] = static_cast<uint8_t>(kValuesIq4nl[k] + 128);
      u = _mm512_shuffle_epi8(
          _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(biased))), u);
    }
    return u;
  }
}
static inline __m512i Activations2(const Q8Block32& a0, const Q8Block32& a1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(Load32B(reinterpret_cast<const uint8_t*>(a0.q))),
                            Load32B(reinterpret_cast<const uint8_t*>(a1.q)), 1);
}

// One block's scales for the RM rows of a tile, in the lanes (m: Q4_1/Q5_1).
struct Heads {
  __m256 d, m;
};
template <int kType, int RM>
static inline Heads GatherScales(const uint8_t* b0, size_t row_bytes) {
  const __m256i heads = GatherHeads<RM>(b0, row_bytes, 0);
  return {HalvesToFloats(heads, 0),
          kHasMin<kType> ? HalvesToFloats(heads, 1) : _mm256_setzero_ps()};
}

// The f32 step of one block for the RM rows in the lanes of acc.
template <int kType>
static inline __m256 Step(__m256 acc, __m256i s, const Q8Block32& x, const Heads& h) {
  const __m256 dx = _mm256_set1_ps(x.d);
  s = _mm256_sub_epi32(s, _mm256_set1_epi32(kOffset<kType> * x.sum));
  acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, h.d), _mm256_cvtepi32_ps(s), acc);
  if constexpr (kHasMin<kType>) {
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, h.m), _mm256_set1_ps(static_cast<float>(x.sum)), acc);
  }
  return acc;
}

// RM rows (<= 8) x RN tokens over all blocks, two blocks per step.
template <int kType, int RM, int RN>
void Tile32(const uint8_t* w, size_t row_bytes, int64_t n_blocks, const Q8Block32* a, int64_t lda,
            float* y, int64_t ldy) {
  constexpr int kB = kBytes32<kType>;
  __m256 acc[RN];
#pragma GCC unroll 4
  for (int t = 0; t < RN; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n_blocks; ib += 2) {
    const bool pair = ib + 1 < n_blocks;
    const uint8_t* b0 = w + ib * kB;
    const uint8_t* b1 = pair ? b0 + kB : b0;
    __m512i dot[RN][RM];
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const size_t off = static_cast<size_t>(r) * row_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(b0 + off + 2 * RM * row_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b0 + off + 2 * RM * row_bytes + 64), _MM_HINT_T0);
      const __m512i u = Values2<kType>(b0 + off, b1 + off);
#pragma GCC unroll 4
      for (int t = 0; t < RN; ++t) {
        const Q8Block32* x = a + t * lda + ib;
        dot[t][r] =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, Activations2(x[0], pair ? x[1] : x[0]));
      }
    }
    // The rows' scales once per block, for every token of the tile.
    const Heads h0 = GatherScales<kType, RM>(b0, row_bytes);
    const Heads h1 = pair ? GatherScales<kType, RM>(b1, row_bytes) : h0;
#pragma GCC unroll 4
    for (int t = 0; t < RN; ++t) {
      __m256i s0, s1;  // rows' sums of block ib and ib + 1
      SumRows<RM>(dot[t], &s0, &s1);
      const Q8Block32* x = a + t * lda + ib;
      acc[t] = Step<kType>(acc[t], s0, x[0], h0);
      if (pair) acc[t] = Step<kType>(acc[t], s1, x[1], h1);
    }
  }
  const __mmask8 rows = static_cast<__mmask8>((1u << RM) - 1u);
#pragma GCC unroll 4
  for (int t = 0; t < RN; ++t) _mm256_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

// ------------------------------------------------------------ prompt panels

struct alignas(64) Panel32 {
  uint8_t q[8][kPanelRows][4];  // dword k (values 4k..4k+3) of each row
  float d[kPanelRows], m[kPanelRows];
};

// Panels of `rows` rows (<= 16; the rest zero) for all n_blocks blocks. Two
// rows' values per vector (rows i and i + 4 for i < 4, 8 + i and 12 + i),
// then 4 x 4 dword transposes inside 128-bit lanes and one lane shuffle put
// dword k of the 16 rows side by side.
template <int kType>
void Pack32(const uint8_t* w, size_t row_bytes, int rows, int64_t n_blocks, Panel32* p) {
  constexpr int kB = kBytes32<kType>;
  const __mmask16 live = FirstLanes(rows);
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t ib = 0; ib < n_blocks; ++ib, ++p) {
    const uint8_t* b0 = w + ib * kB;
    auto block = [&](int r) { return b0 + static_cast<size_t>(r < rows ? r : 0) * row_bytes; };
    __m512i v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int r0 = i < 4 ? i : 4 + i, r1 = r0 + 4;
      v[i] = Values2<kType>(block(r0), block(r1));
      const __mmask64 keep = (r0 < rows ? 0xFFFFFFFFull : 0) | (r1 < rows ? ~0xFFFFFFFFull : 0);
      v[i] = _mm512_maskz_mov_epi8(keep, v[i]);
    }
    __m512i x[8];  // x[4G + c] lane L: dword 4 (L % 2) + c of the rows of v[4G .. 4G + 3]
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const __m512i* r = v + 4 * g;
      const __m512i t0 = _mm512_unpacklo_epi32(r[0], r[1]), t1 = _mm512_unpackhi_epi32(r[0], r[1]);
      const __m512i t2 = _mm512_unpacklo_epi32(r[2], r[3]), t3 = _mm512_unpackhi_epi32(r[2], r[3]);
      x[4 * g + 0] = _mm512_unpacklo_epi64(t0, t2);
      x[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
      x[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
      x[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      _mm512_store_si512(p->q[c], _mm512_shuffle_i32x4(x[c], x[4 + c], 0x88));
      _mm512_store_si512(p->q[4 + c], _mm512_shuffle_i32x4(x[c], x[4 + c], 0xDD));
    }
    // d (and m) of the 16 rows: one 32-bit gather of the blocks' first bytes.
    const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, b0, 1);
    _mm512_store_ps(p->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
    _mm512_store_ps(p->m, kHasMin<kType>
                              ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)))
                              : _mm512_setzero_ps());
  }
}

// NP panels (16 rows each) x RN tokens over one pass; the first `rows` rows
// exist; the sums go to y (token t0's row 0).
template <int kType, class Pass, int NP, int RN>
__attribute__((noinline)) void PanelTile32(const Pass& pass, int64_t t0, int rows, float* y,
                                           int64_t ldy) {
  __mmask16 store[NP];
  __m512 acc[NP][RN];
#pragma GCC unroll 2
  for (int n = 0; n < NP; ++n) {
    store[n] = FirstLanes(std::clamp(rows - kPanelRows * n, 0, kPanelRows));
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) {
      acc[n][t] =
          pass.acc == nullptr
              ? _mm512_setzero_ps()
              : _mm512_maskz_loadu_ps(store[n], pass.acc + (t0 + t) * kAccFloats + kPanelRows * n);
    }
  }
  const Panel32* p = pass.p;
  const Q8Block32* a = pass.a + t0 * pass.lda;
  for (int64_t ib = 0; ib < pass.n_blocks; ++ib, ++p, ++a) {
    const Panel32* pn[NP];
#pragma GCC unroll 2
    for (int n = 0; n < NP; ++n) pn[n] = p + n * pass.panel_stride;
    __m512i dot[NP][RN];
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) {
      // S = sum u a - o * sum a: the dot products start at -o * sum.
      __m512i init = _mm512_setzero_si512();
      if constexpr (!kHasMin<kType>) {
        init = _mm512_sub_epi32(
            init, _mm512_slli_epi32(_mm512_set1_epi32(a[t * pass.lda].sum), kOffsetShift<kType>));
      }
#pragma GCC unroll 2
      for (int n = 0; n < NP; ++n) dot[n][t] = init;
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      __m512i wv[NP];
#pragma GCC unroll 2
      for (int n = 0; n < NP; ++n) wv[n] = _mm512_load_si512(pn[n]->q[k]);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) {
        int32_t xv;
        std::memcpy(&xv, a[t * pass.lda].q + 4 * k, 4);
        const __m512i xb = _mm512_set1_epi32(xv);
#pragma GCC unroll 2
        for (int n = 0; n < NP; ++n) dot[n][t] = _mm512_dpbusd_epi32(dot[n][t], wv[n], xb);
      }
    }
#pragma GCC unroll 2
    for (int n = 0; n < NP; ++n) {
      const __m512 d = _mm512_load_ps(pn[n]->d);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) {
        const __m512 dx = _mm512_set1_ps(a[t * pass.lda].d);
        acc[n][t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(dot[n][t]), acc[n][t]);
        if constexpr (kHasMin<kType>) {
          const __m512 sum = _mm512_set1_ps(static_cast<float>(a[t * pass.lda].sum));
          acc[n][t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_load_ps(pn[n]->m)), sum, acc[n][t]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int n = 0; n < NP; ++n) {
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t)
      _mm512_mask_storeu_ps(y + t * ldy + kPanelRows * n, store[n], acc[n][t]);
  }
}

// The 32-value family for IntegerGemm (qroute_avx512.h).
template <int kType>
struct Blocks32 {
  using Act = Q8Block32;
  using Panel = Panel32;
  static constexpr size_t kBlockBytes = kBytes32<kType>;
  static constexpr int kAuxInts = 0;
  static constexpr int kPairTokens = 4, kSingleTokens = 8;
  template <int RM, int RN>
  static void Tile(const uint8_t* w, size_t row_bytes, int64_t n_blocks, const Act* a, int64_t lda,
                   float* y, int64_t ldy) {
    Tile32<kType, RM, RN>(w, row_bytes, n_blocks, a, lda, y, ldy);
  }
  static void Pack(const uint8_t* w, size_t row_bytes, int rows, int64_t n_blocks, Panel* p) {
    Pack32<kType>(w, row_bytes, rows, n_blocks, p);
  }
  static void PrepareTokens(const Act*, int64_t, int64_t, int64_t, int32_t*) {}
  template <int NP, int RN>
  static void PanelTile(const PanelPass<Blocks32>& pass, int64_t t0, int rows, float* y,
                        int64_t ldy) {
    PanelTile32<kType, PanelPass<Blocks32>, NP, RN>(pass, t0, rows, y, ldy);
  }
};

}  // namespace

void QGemm32Avx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                   const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  switch (type) {
    case DType::kQ8_0:
      return IntegerGemm<Blocks32<kQ8_0>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kIQ4_NL:
      return IntegerGemm<Blocks32<kIQ4NL>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y,
                                           ldy);
    case DType::kQ4_0:
      return IntegerGemm<Blocks32<kQ4_0>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ4_1:
      return IntegerGemm<Blocks32<kQ4_1>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ5_0:
      return IntegerGemm<Blocks32<kQ5_0>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ5_1:
      return IntegerGemm<Blocks32<kQ5_1>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    default:
      return LowbitQGemm32Avx512(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
  }
}

// QuantizeQ8_32Ref, 32 values per step; the same bytes (one f32 product
// rounded to nearest even either way, the scale through the same fp16).
void QuantizeQ8_32Avx512(const float* x, int64_t n, Q8Block32* out) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t ib = 0; ib < n / kQ8Block32Values; ++ib, x += kQ8Block32Values) {
    Q8Block32& b = out[ib];
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    // NaN never wins (vmaxps returns its second operand on NaN), as fmax.
    const __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, v1),
                                   _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_setzero_ps()));
    const float amax = avx512::HMax(m);
    b.d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id)));
    const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.q), q0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.q + 16), q1);
    b.sum = _mm512_reduce_add_epi32(
        _mm512_add_epi32(_mm512_cvtepi8_epi32(q0), _mm512_cvtepi8_epi32(q1)));
  }
}

}  // namespace mx::kernels::internal
