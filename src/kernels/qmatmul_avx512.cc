// AVX-512 (BW + VNNI) kernels of the integer K-quant path: qdot_blocks.h's
// arithmetic, the same bits, with the block sums computed 64 values at a
// time. A weight row's 64 values of one chunk are unpacked to unsigned bytes
// in value order; vpmaddubsw multiplies them with the token's int8
// activations (pairs summed to int16, exact: |pair| <= 2 * 63 * 128), and
// vpdpwssd multiplies those pairs by the sub-block scales and accumulates
// int32 (exact). At the end of a block the 16 lanes of every (row, token)
// accumulator are summed across rows at once (a transpose-and-add tree, exact
// integers), and the block's float step of qdot_blocks.h runs with the rows
// in the lanes of one vector per token.
//
// Decode tiles: up to 8 rows x 1 token, 4 rows x 4 tokens. Prompts (12
// tokens or more) run the panels below instead (qroute_avx512.h): 2 x 16
// rows x 6 tokens per tile. The float step per output element is the same
// in every tile, so results never depend on the tiling (batch invariance).
#include "kernels/dequant_blocks.h"
#include "kernels/isa.h"
#include "kernels/qroute_avx512.h"
#include "kernels/simd_avx512.h"

namespace mx::kernels::internal {
namespace {

using avx512::Broadcast32;
using avx512::FirstLanes;
using avx512::FoldHalves;
using avx512::GatherHeads;
using avx512::HalfValue;
using avx512::Halves16;
using avx512::HalvesToFloats;
using avx512::SumRows;

constexpr int kQ4K = 12, kQ5K = 13, kQ6K = 14;
template <int kType>
constexpr int kBlockBytes = kType == kQ4K ? 144 : (kType == kQ5K ? 176 : 210);

// One row's Q4_K / Q5_K block header: the 8 scales as int16 (lanes 0-7, for
// vpermw) and the mins repeated for the two 16-value sums of each sub-block.
struct RowK {
  __m512i sc;
  __m256i mins;
};
static inline RowK PrepareK(const uint8_t* b) {
  const KScalesMins k = KScalesMinsOf(b);
  const uint64_t sc = k.sc, m = k.m;
  RowK r;
  r.sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  r.mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m)), dup));
  return r;
}

// Values 64 c .. 64 c + 63 of a Q4_K / Q5_K block as bytes: chunk c's 32
// bytes hold sub-block 2c in the low nibbles, 2c + 1 in the high ones (and,
// for Q5_K, bits 2c / 2c + 1 of qh[0..32) are their fifth bits).
template <int kType>
static inline __m512i ChunkK(const uint8_t* b, int c) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i raw = Broadcast32(b + (kType == kQ5K ? 48 : 16) + 32 * c);
  __m512i q = _mm512_and_si512(_mm512_srlv_epi16(raw, Halves16(0, 4)), low4);
  if constexpr (kType == kQ5K) {
    const __m512i qh = Broadcast32(b + 16);
    const __m512i bit = _mm512_and_si512(
        _mm512_srlv_epi16(qh, Halves16(static_cast<short>(2 * c), static_cast<short>(2 * c + 1))),
        _mm512_set1_epi8(1));
    q = _mm512_or_si512(q, _mm512_slli_epi16(bit, 4));
  }
  return q;
}
// int16 lane i of chunk c's scale vector: sub-block 2c + i / 16.
static inline __m512i ScalesK(const RowK& r, int c) {
  return _mm512_permutexvar_epi16(
      Halves16(static_cast<short>(2 * c), static_cast<short>(2 * c + 1)), r.sc);
}

// A Q6_K block's values as unsigned bytes (0..63) in value order, 64 per
// vector (see matmul_avx512.cc BlockQ6K for the bit layout).
static inline void UnpackQ6K(const uint8_t* b, __m512i (&q)[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(0x03);
  for (int n = 0; n < 2; ++n) {
    const __m512i ql = _mm512_loadu_si512(b + 64 * n);
    const __m512i qh = Broadcast32(b + 128 + 32 * n);
    const __m512i hi_lo =
        _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, Halves16(0, 2)), low2), 4);
    const __m512i hi_hi =
        _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, Halves16(4, 6)), low2), 4);
    q[2 * n] = _mm512_or_si512(_mm512_and_si512(ql, low4), hi_lo);
    q[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hi_hi);
  }
}
// int16 lane i of vector c's scale vector: scale 4c + i / 8 (16 values each).
static inline __m512i ScalesQ6K(__m512i sc16, int c) {
  const __m512i idx = _mm512_cvtepu8_epi16(
      _mm256_add_epi8(_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                       2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                      _mm256_set1_epi8(static_cast<char>(4 * c))));
  return _mm512_permutexvar_epi16(idx, sc16);
}

// RM rows (<= 8) x RN tokens over all n_blocks blocks.
template <int kType, int RM, int RN>
void QTile(const uint8_t* w, size_t row_bytes, int64_t n_blocks, const Q8KBlock* a, int64_t lda,
           float* y, int64_t ldy) {
  constexpr int kBytes = kBlockBytes<kType>;
  __m256 acc[RN];
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    const uint8_t* b0 = w + ib * kBytes;
    __m512i sum[RN][RM];
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const uint8_t* b = b0 + static_cast<size_t>(r) * row_bytes;
#pragma GCC unroll 4
      for (int o = 0; o < kBytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(b + 2 * RM * row_bytes + o), _MM_HINT_T0);
      }
      if constexpr (kType == kQ6K) {
        __m512i q[4];
        UnpackQ6K(b, q);
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
        __m512i s[RN];
#pragma GCC unroll 8
        for (int t = 0; t < RN; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m512i scv = ScalesQ6K(_mm512_castsi256_si512(sc16), c);
#pragma GCC unroll 8
          for (int t = 0; t < RN; ++t) {
            const __m512i x = _mm512_load_si512(a[t * lda + ib].q + 64 * c);
            s[t] = _mm512_dpwssd_epi32(s[t], _mm512_maddubs_epi16(q[c], x), scv);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < RN; ++t) {
          // The -32 offset: 32 * sum_j sc_j * (sum of a over j), folded in exactly.
          const __m256i bs =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(a[t * lda + ib].bsums));
          const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);
          sum[t][r] = _mm512_sub_epi32(s[t], _mm512_zextsi256_si512(off));
        }
      } else {
        const RowK rk = PrepareK(b);
        __m512i s[RN];
#pragma GCC unroll 8
        for (int t = 0; t < RN; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m512i q = ChunkK<kType>(b, c);
          const __m512i scv = ScalesK(rk, c);
#pragma GCC unroll 8
          for (int t = 0; t < RN; ++t) {
            const __m512i x = _mm512_load_si512(a[t * lda + ib].q + 64 * c);
            s[t] = _mm512_dpwssd_epi32(s[t], _mm512_maddubs_epi16(q, x), scv);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < RN; ++t) {
          const __m256i bs =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(a[t * lda + ib].bsums));
          sum[t][r] = FoldHalves(s[t], _mm256_madd_epi16(rk.mins, bs));
        }
      }
    }
    const __m256i heads = GatherHeads<RM>(b0, row_bytes, kType == kQ6K ? 206 : 0);
    const __m256 d = HalvesToFloats(heads, kType == kQ6K);
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) {
      const __m256 dx = _mm256_set1_ps(a[t * lda + ib].d);
      if constexpr (kType == kQ6K) {
        // Lane r of the row tree: row r's 16 lanes summed.
        __m512i z[RM];
#pragma GCC unroll 8
        for (int r = 0; r < RM; ++r) z[r] = FoldHalves(sum[t][r], _mm256_setzero_si256());
        __m256i s8, unused;
        SumRows<RM>(z, &s8, &unused);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(s8), acc[t]);
      } else {
        __m256i s8, m8;
        SumRows<RM>(sum[t], &s8, &m8);
        const __m256 dmin = HalvesToFloats(heads, 1);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(s8), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dx, dmin), _mm256_cvtepi32_ps(m8), acc[t]);
      }
    }
  }
  const __mmask8 rows = static_cast<__mmask8>((1u << RM) - 1u);
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) _mm256_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

// ------------------------------------------------------------ prompt panels
//
// For many tokens the rows' blocks are first unpacked into panels of 16 rows
// (once per call, reused by every token): the values as bytes with dword k
// of the 16 rows side by side, so one vpdpbusd multiplies 4 values of 16
// rows with 4 of one token's activations (broadcast) and the row lanes never
// need a horizontal sum. Per sub-block the exact int32 dot products are
// multiplied by the rows' scales (vpmulld) and summed; for Q4_K / Q5_K the
// dot product runs on over the whole block and meets scale differences
// (sum_j D_j (sc_j - sc_j+1) with D_j the sum over sub-blocks 0..j, exact
// in int32 arithmetic, which wraps like the integers it stands for). The mins
// go through vpdpwssd with (m_2i, m_2i+1) int16 pairs against the token's
// 32-value sums; Q6_K: each sub-block's dot product starts at the token's
// -32 * (sum of a over it), so the offset is folded in before the scale. The
// integers equal the tiles' above, and the float step is the same per
// element: the same bits.

struct alignas(64) PanelBlock {
  uint8_t q[64][kPanelRows][4];  // dword k (values 4k..4k+3) of each row
  int32_t sc[16][kPanelRows];    // sub-block scales (Q4_K / Q5_K: sc_j - sc_j+1, 8 of 32 values)
  int32_t mins[4][kPanelRows];   // Q4_K / Q5_K: int16 pairs (m_2i, m_2i+1)
  float d[kPanelRows], dmin[kPanelRows];
};

// Per (token, block) ints of the panel tiles (PrepareTokensK).
template <int kType>
constexpr int kAuxK = kType == kQ6K ? 16 : 4;

// Values 64c .. 64c + 63 of a Q6_K block (vector c of UnpackQ6K).
static inline __m512i ChunkQ6K(const uint8_t* b, int c) {
  const int n = c / 2;
  const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(0x03);
  __m512i ql = _mm512_loadu_si512(b + 64 * n);
  const __m512i qh = Broadcast32(b + 128 + 32 * n);
  const short s = static_cast<short>(c % 2 == 0 ? 0 : 4);
  if (c % 2 != 0) ql = _mm512_srli_epi16(ql, 4);
  const __m512i hi = _mm512_slli_epi16(
      _mm512_and_si512(_mm512_srlv_epi16(qh, Halves16(s, static_cast<short>(s + 2))), low2), 4);
  return _mm512_or_si512(_mm512_and_si512(ql, low4), hi);
}

// The scales, mins and d of 16 rows' blocks at b0 (row r at b0 + idx[r];
// rows outside `live` zero), one row per lane: 32-bit gathers of the
// headers, then the bit fields of KScalesMinsOf in every lane at once.
template <int kType>
static inline void PackHeads(const uint8_t* b0, __m512i idx, __mmask16 live, PanelBlock* p) {
  auto gather = [&](int offset) {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, b0 + offset, 1);
  };
  auto byte = [](__m512i v, int i) {
    return _mm512_and_si512(_mm512_srli_epi32(v, 8 * i), _mm512_set1_epi32(0xFF));
  };
  if constexpr (kType == kQ6K) {
    for (int c = 0; c < 4; ++c) {
      const __m512i g = gather(192 + 4 * c);  // scales 4c .. 4c + 3 (int8)
      for (int i = 0; i < 4; ++i) {
        _mm512_store_si512(p->sc[4 * c + i],
                           _mm512_srai_epi32(_mm512_slli_epi32(g, 24 - 8 * i), 24));
      }
    }
    // Bytes 206-209 (the block ends at 210): d in the high half.
    const __m512i h = _mm512_srli_epi32(gather(206), 16);
    _mm512_store_ps(p->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
  } else {
    const __m512i k6 = _mm512_set1_epi32(0x3F3F3F3F), k4 = _mm512_set1_epi32(0x0F0F0F0F),
                  k2 = _mm512_set1_epi32(0x03030303);
    const __m512i u0 = gather(4), u1 = gather(8), u2 = gather(12);
    auto high = [&](__m512i lo_bits, __m512i u) {  // (lo & k4) | (((u >> 6) & k2) << 4)
      return _mm512_or_si512(_mm512_and_si512(lo_bits, k4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u, 6), k2), 4));
    };
    const __m512i sc[2] = {_mm512_and_si512(u0, k6), high(u2, u0)};
    const __m512i m[2] = {_mm512_and_si512(u1, k6), high(_mm512_srli_epi32(u2, 4), u1)};
    // sc_j - sc_j+1 (sc_8 = 0) against the running dot product D_j of
    // sub-blocks 0..j: sum_j D_j (sc_j - sc_j+1) = sum_j sc_j dot_j.
    for (int j = 0; j < 8; ++j) {
      const __m512i next = j < 7 ? byte(sc[(j + 1) / 4], (j + 1) % 4) : _mm512_setzero_si512();
      _mm512_store_si512(p->sc[j], _mm512_sub_epi32(byte(sc[j / 4], j % 4), next));
    }
    for (int i = 0; i < 4; ++i) {  // (m_2i, m_2i+1) as int16 pairs
      const __m512i v = m[i / 2];
      const int lo = 2 * (i % 2);
      _mm512_store_si512(p->mins[i],
                         _mm512_or_si512(byte(v, lo), _mm512_slli_epi32(byte(v, lo + 1), 16)));
    }
    const __m512i h = gather(0);  // d, dmin
    _mm512_store_ps(p->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
    _mm512_store_ps(p->dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))));
  }
}

// Panels of `rows` rows (<= 16; the rest zero) for all n_blocks blocks.
template <int kType>
void PackPanel(const uint8_t* w, size_t row_bytes, int rows, int64_t n_blocks, PanelBlock* p) {
  constexpr int kBytes = kBlockBytes<kType>;
  const __mmask16 live = FirstLanes(rows);
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t ib = 0; ib < n_blocks; ++ib, ++p) {
    const uint8_t* b0 = w + ib * kBytes;
    for (int c = 0; c < 4; ++c) {
      __m512i v[16];
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) {
        const uint8_t* b = b0 + static_cast<size_t>(r) * row_bytes;
        if (r >= rows) {
          v[r] = _mm512_setzero_si512();
        } else if constexpr (kType == kQ6K) {
          v[r] = ChunkQ6K(b, c);
        } else {
          v[r] = ChunkK<kType>(b, c);
        }
      }
      avx512::Transpose16x16(v);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) _mm512_store_si512(p->q[16 * c + i], v[i]);
    }
    PackHeads<kType>(b0, idx, live, p);
  }
}

// aux[(ib * n_tokens + t) * kAuxK + i]: Q4_K / Q5_K: the int16 pairs (sum of
// a over sub-block 2i, over 2i + 1), i < 4; Q6_K: -32 * bsums[i], i < 16.
template <int kType>
void PrepareTokensK(const Q8KBlock* a, int64_t lda, int64_t n_tokens, int64_t n_blocks,
                    int32_t* aux) {
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[t * lda + ib].bsums));
      int32_t* o = aux + (ib * n_tokens + t) * kAuxK<kType>;
      if constexpr (kType == kQ6K) {
        const __m512i v = _mm512_slli_epi32(_mm512_cvtepi16_epi32(bs), 5);
        _mm512_storeu_si512(o, _mm512_sub_epi32(_mm512_setzero_si512(), v));
      } else {
        // Pairs of 16-value sums added (exact in int16: |sum of 32 int8| <= 4096).
        const __m256i s32 = _mm256_hadd_epi16(bs, bs);  // lanes 0-3, 8-11 of the 16-bit sums
        const __m128i lo = _mm256_castsi256_si128(s32), hi = _mm256_extracti128_si256(s32, 1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_unpacklo_epi64(lo, hi));
      }
    }
  }
}

// NP panels (16 rows each) x RN tokens over one pass; the first `rows` rows
// exist; the sums go to y (token t0's row 0).
template <int kType, class Pass, int NP, int RN>
__attribute__((noinline)) void PanelTile(const Pass& pass, int64_t t0, int rows, float* y,
                                         int64_t ldy) {
  constexpr int kSub = kType == kQ6K ? 16 : 8;  // sub-blocks
  constexpr int kDwords = 64 / kSub;            // dwords per sub-block
  constexpr int kAux = kAuxK<kType>;
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
  const PanelBlock* p = pass.p;
  const Q8KBlock* a = pass.a + t0 * pass.lda;
  const int32_t* aux = pass.aux + t0 * kAux;
  for (int64_t ib = 0; ib < pass.n_blocks; ++ib, ++p, ++a, aux += pass.aux_stride) {
    const PanelBlock* pn[NP];
#pragma GCC unroll 2
    for (int n = 0; n < NP; ++n) pn[n] = p + n * pass.panel_stride;
    __m512i sum[NP][RN], dot[NP][RN];
#pragma GCC unroll 1
    for (int j = 0; j < kSub; ++j) {
      // Q6_K: each sub-block's dot products start at the offset; Q4_K /
      // Q5_K: one running dot product per block (the scales are differences).
      if (kType == kQ6K || j == 0) {
#pragma GCC unroll 8
        for (int t = 0; t < RN; ++t) {
          const __m512i init =
              kType == kQ6K ? _mm512_set1_epi32(aux[t * kAux + j]) : _mm512_setzero_si512();
#pragma GCC unroll 2
          for (int n = 0; n < NP; ++n) dot[n][t] = init;
        }
      }
#pragma GCC unroll 8
      for (int kk = 0; kk < kDwords; ++kk) {
        const int k = j * kDwords + kk;
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
        const __m512i scv = _mm512_load_si512(pn[n]->sc[j]);
#pragma GCC unroll 8
        for (int t = 0; t < RN; ++t) {
          const __m512i s = _mm512_mullo_epi32(dot[n][t], scv);
          sum[n][t] = j == 0 ? s : _mm512_add_epi32(sum[n][t], s);
        }
      }
    }
#pragma GCC unroll 2
    for (int n = 0; n < NP; ++n) {
      const __m512 d = _mm512_load_ps(pn[n]->d);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) {
        const __m512 dx = _mm512_set1_ps(a[t * pass.lda].d);
        acc[n][t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(sum[n][t]), acc[n][t]);
        if constexpr (kType != kQ6K) {
          __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) {
            m = _mm512_dpwssd_epi32(m, _mm512_load_si512(pn[n]->mins[i]),
                                    _mm512_set1_epi32(aux[t * kAux + i]));
          }
          acc[n][t] = _mm512_fnmadd_ps(_mm512_mul_ps(dx, _mm512_load_ps(pn[n]->dmin)),
                                       _mm512_cvtepi32_ps(m), acc[n][t]);
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

// The K-quant family for IntegerGemm (qroute_avx512.h).
template <int kType>
struct KQuants {
  using Act = Q8KBlock;
  using Panel = PanelBlock;
  static constexpr size_t kBlockBytes = internal::kBlockBytes<kType>;
  static constexpr int kAuxInts = kAuxK<kType>;
  static constexpr int kPairTokens = 6, kSingleTokens = 8;
  template <int RM, int RN>
  static void Tile(const uint8_t* w, size_t row_bytes, int64_t n_blocks, const Act* a, int64_t lda,
                   float* y, int64_t ldy) {
    QTile<kType, RM, RN>(w, row_bytes, n_blocks, a, lda, y, ldy);
  }
  static void Pack(const uint8_t* w, size_t row_bytes, int rows, int64_t n_blocks, Panel* p) {
    PackPanel<kType>(w, row_bytes, rows, n_blocks, p);
  }
  static void PrepareTokens(const Act* a, int64_t lda, int64_t n_tokens, int64_t n_blocks,
                            int32_t* aux) {
    PrepareTokensK<kType>(a, lda, n_tokens, n_blocks, aux);
  }
  template <int NP, int RN>
  static void PanelTile(const PanelPass<KQuants>& pass, int64_t t0, int rows, float* y,
                        int64_t ldy) {
    internal::PanelTile<kType, PanelPass<KQuants>, NP, RN>(pass, t0, rows, y, ldy);
  }
};

}  // namespace

void QGemmAvx512(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                 const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  switch (type) {
    case DType::kQ4_K:
      return IntegerGemm<KQuants<kQ4K>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ5_K:
      return IntegerGemm<KQuants<kQ5K>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    case DType::kQ6_K:
      return IntegerGemm<KQuants<kQ6K>>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    default:
      return LowbitQGemmAvx512(type, w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
  }
}

// QuantizeQ8KRef with 16 values per step; the same bytes (the rounding is
// one f32 product rounded to nearest even either way).
void QuantizeQ8KAvx512(const float* x, int64_t n, Q8KBlock* out) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t ib = 0; ib < n / kQ8KValues; ++ib, x += kQ8KValues) {
    Q8KBlock& b = out[ib];
    __m512 amax = _mm512_setzero_ps();
    // NaN in x never wins (vmaxps returns its second operand on NaN).
    for (int i = 0; i < 16; ++i) {
      amax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * i)), amax);
    }
    const float m = avx512::HMax(amax);
    if (!(m > 0.0f)) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    // The first value whose magnitude is the maximum.
    float max = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * i)),
                                               _mm512_set1_ps(m), _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[16 * i + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * i)));
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      _mm_store_si128(reinterpret_cast<__m128i*>(b.q + 16 * i), _mm512_cvtepi32_epi8(q));
    }
    // Sums of 16: vpsadbw adds 8 bytes (q + 128, unsigned) per 64-bit lane;
    // adjacent lanes added, less 16 * 128.
    __m512i sad[4];
    for (int v = 0; v < 4; ++v) {
      const __m512i u = _mm512_xor_si512(_mm512_load_si512(b.q + 64 * v),
                                         _mm512_set1_epi8(static_cast<char>(0x80)));
      sad[v] = _mm512_sad_epu8(u, _mm512_setzero_si512());
    }
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    for (int h = 0; h < 2; ++h) {
      const __m512i s =
          _mm512_add_epi64(_mm512_permutex2var_epi64(sad[2 * h], even, sad[2 * h + 1]),
                           _mm512_permutex2var_epi64(sad[2 * h], odd, sad[2 * h + 1]));
      const __m512i centred = _mm512_sub_epi64(s, _mm512_set1_epi64(16 * 128));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b.bsums + 8 * h), _mm512_cvtepi64_epi16(centred));
    }
    b.d = 1.0f / iscale;
  }
}

}  // namespace mx::kernels::internal
