// Internal: the SIMD integer kernels of the low-bit types (lowbit_blocks.h)
// over a row block of weights and a tile of tokens. Each stored block is
// unpacked once per (row, token tile) into int8 values and scales, prepared
// for the path's byte products (Prep), and dotted with up to kLowbitTokens
// tokens; every (row, token) then takes lowbit_blocks.h's f32 step, block by
// block from 0.0f, so the bits are the scalar reference's for any tiling.
// Include only from files compiled with AVX2 (or AVX-512) flags.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/isa.h"
#include "kernels/lowbit_blocks.h"
#include "kernels/simd_avx2.h"

namespace mx::kernels::internal {
namespace {

constexpr int kLowbitTokens = 16;  // tokens sharing one unpacked row block

struct LowbitF16c {
  static float Half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }
};

static inline __m256i LowbitLoad32(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
static inline int32_t LowbitSumLanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
static inline int32_t LowbitSumLanes128(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// A kind-256 block for 256-bit byte products: vpmaddubsw of |q| with the
// activations carrying q's sign (pairs of 16-value groups' products, exact
// in int16: at most 2 * 127 * 127), vpmaddwd with the group scales.
struct LowbitPrep256Avx2 {
  __m256i absq[8], q[8], sc[8];
  __m256i mn;
  explicit LowbitPrep256Avx2(const Lowbit256& b) {
    // The int16 pair sc[2v], sc[2v + 1] (dword v) spread to 8 lanes each.
    const __m256i pair = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                          3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    for (int v = 0; v < 8; ++v) {
      q[v] = LowbitLoad32(b.q + 32 * v);
      absq[v] = _mm256_abs_epi8(q[v]);
      int32_t dword;
      std::memcpy(&dword, b.sc + 2 * v, 4);
      sc[v] = _mm256_shuffle_epi8(_mm256_set1_epi32(dword), pair);
    }
    mn = LowbitLoad32(b.mn);
  }
  // The exact sums S (and M when kHasMin) of lowbit_blocks.h.
  template <bool kHasMin>
  void Sums(const Q8KBlock& x, int32_t* s, int32_t* m) const {
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      const __m256i p =
          _mm256_maddubs_epi16(absq[v], _mm256_sign_epi8(LowbitLoad32(x.q + 32 * v), q[v]));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, sc[v]));
    }
    *s = LowbitSumLanes(sum);
    *m = kHasMin ? LowbitSumLanes(_mm256_madd_epi16(mn, LowbitLoad32(x.bsums))) : 0;
  }
};

// UnpackLowbit256 for the most used types (Q2_K, Q3_K, IQ4_XS) with the
// values unpacked by 256-bit shifts and a table shuffle: the same bytes.
template <uint32_t kType>
static inline void UnpackLowbit256Fast(const uint8_t* __restrict b, Lowbit256* __restrict u) {
  using namespace lowbit;
  if constexpr (kType == kQ2K || kType == kQ3K) {
    const uint8_t* qs = b + (kType == kQ2K ? 16 : 32);
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i four = _mm256_set1_epi8(4);
    const __m256i hm = LowbitLoad32(b);
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = LowbitLoad32(qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        __m256i v = _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(2 * j)), three);
        if constexpr (kType == kQ3K) {
          // q = low 2 bits - 4, plus 4 where the hmask bit is set.
          const __m256i bit =
              _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * h + j)), one);
          v = _mm256_sub_epi8(_mm256_or_si256(v, _mm256_slli_epi16(bit, 2)), four);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(u->q + 128 * h + 32 * j), v);
      }
    }
    if constexpr (kType == kQ2K) {
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
      const __m128i low4 = _mm_set1_epi8(0x0F);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u->sc),
                          _mm256_cvtepu8_epi16(_mm_and_si128(sc, low4)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u->mn),
                          _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), low4)));
      u->d = LowbitF16c::Half(b + 80);
      u->dmin = LowbitF16c::Half(b + 82);
    } else {
      // Scale i: low nibbles of bytes 0-7 (i < 8) or their high nibbles,
      // and bits 2 (i / 4) of byte 8 + i % 4 (dword lane i / 4 shifted by
      // 2 (i / 4); a byte's bits 0-1 then come from that byte alone).
      const __m128i low4 = _mm_set1_epi8(0x0F);
      const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 96));
      const __m128i low =
          _mm_unpacklo_epi64(_mm_and_si128(lo8, low4), _mm_and_si128(_mm_srli_epi16(lo8, 4), low4));
      const __m128i high =
          _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(LoadU32(b + 104))),
                                       _mm_setr_epi32(0, 2, 4, 6)),
                        _mm_set1_epi8(3));
      const __m128i sc8 =
          _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u->sc), _mm256_cvtepi8_epi16(sc8));
      std::memset(u->mn, 0, sizeof(u->mn));
      u->d = LowbitF16c::Half(b + 108);
      u->dmin = 0.0f;
    }
  } else if constexpr (kType == kIQ4XS) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIq4nl));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const uint16_t scales_h = LoadU16(b + 2);
    for (int ib = 0; ib < 8; ++ib) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 8 + 16 * ib));
      const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(raw, low4));
      const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(raw, 4), low4));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u->q + 32 * ib), _mm256_setr_m128i(lo, hi));
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4);
      SetScales16(u, ib, ls - 32, ls - 32);
    }
    std::memset(u->mn, 0, sizeof(u->mn));
    u->d = LowbitF16c::Half(b);
    u->dmin = 0.0f;
  } else {
    UnpackLowbit256<LowbitF16c>(kType, b, u);
  }
}

// Rows [0, n_rows) x tokens of a kind-256 type with the path's Prep.
template <class Prep, uint32_t kType>
void LowbitSweep256(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                    const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  constexpr LowbitLayout l = LowbitLayoutFor(kType);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kLowbitTokens) {
    const int nt = static_cast<int>(n_tokens - t0 < kLowbitTokens ? n_tokens - t0 : kLowbitTokens);
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
      float acc[kLowbitTokens] = {};
      for (int64_t ib = 0; ib < n_blocks; ++ib) {
        _mm_prefetch(reinterpret_cast<const char*>(row + row_bytes + ib * l.bytes), _MM_HINT_T0);
        Lowbit256 u;
        UnpackLowbit256Fast<kType>(row + ib * l.bytes, &u);
        const Prep p(u);
        for (int t = 0; t < nt; ++t) {
          const Q8KBlock& x = a[(t0 + t) * lda + ib];
          int32_t s, m;
          p.template Sums<l.has_min>(x, &s, &m);
          acc[t] = Lowbit256Step<l.has_min>(u, x.d, s, m, acc[t]);
        }
      }
      for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r] = acc[t];
    }
  }
}

// UnpackLowbit32 with the values in a register, built by byte shuffles
// (the same values; u's q is left unset).
template <uint32_t kType>
static inline __m256i UnpackLowbit32Fast(const uint8_t* __restrict b, int c,
                                         Lowbit32* __restrict u) {
  using namespace lowbit;
  const __m128i low4 = _mm_set1_epi8(0x0F);
  if constexpr (kType == kQ1_0) {
    // Byte j takes byte j / 8 of the 32 bits and tests bit j % 8: +1 or -1.
    uint32_t bits;
    std::memcpy(&bits, b + 2 + 4 * c, 4);
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    u->d[0] = u->d[1] = LowbitF16c::Half(b);
    return _mm256_sub_epi8(_mm256_and_si256(set, _mm256_set1_epi8(2)), _mm256_set1_epi8(1));
  } else if constexpr (kType == kQ2_0) {
    // Byte j takes byte j / 4 of the 8 bytes, shifted by 2 (j % 4).
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * c));
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_setr_m128i(raw, raw),
                            _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4,
                                             4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7));
    const __m256i three = _mm256_set1_epi8(3);
    __m256i v = _mm256_and_si256(spread, three);
    for (int i = 1; i < 4; ++i) {
      const __m256i shifted =
          _mm256_and_si256(_mm256_srl_epi16(spread, _mm_cvtsi32_si128(2 * i)), three);
      const __m256i lane = _mm256_set1_epi32(static_cast<int>(0xFFu << (8 * i)));
      v = _mm256_blendv_epi8(v, shifted, lane);
    }
    u->d[0] = u->d[1] = LowbitF16c::Half(b);
    return _mm256_sub_epi8(v, _mm256_set1_epi8(1));
  } else if constexpr (kType == kMXFP4) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 1));
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesFp4));
    u->d[0] = u->d[1] = E8m0Half(b[0]);
    return _mm256_setr_m128i(_mm_shuffle_epi8(table, _mm_and_si128(raw, low4)),
                             _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(raw, 4), low4)));
  } else if constexpr (kType == kNVFP4) {
    // Bytes 0-7 hold sub-block 2c (low nibbles first), 8-15 sub-block 2c + 1.
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4 + 16 * c));
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesFp4));
    const __m128i lo = _mm_and_si128(raw, low4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
    u->d[0] = Ue4m3Half(b[2 * c]);
    u->d[1] = Ue4m3Half(b[2 * c + 1]);
    return _mm256_setr_m128i(_mm_shuffle_epi8(table, _mm_unpacklo_epi64(lo, hi)),
                             _mm_shuffle_epi8(table, _mm_unpackhi_epi64(lo, hi)));
  } else {
    UnpackLowbit32<LowbitF16c>(kType, b, c, u);
    return LowbitLoad32(u->q);
  }
}

// Rows [0, n_rows) x tokens of a kind-32 type (n_act Q8_0 blocks per token).
template <uint32_t kType>
void LowbitSweep32(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_act,
                   const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  constexpr LowbitLayout l = LowbitLayoutFor(kType);
  constexpr int kPerBlock = l.values / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kLowbitTokens) {
    const int nt = static_cast<int>(n_tokens - t0 < kLowbitTokens ? n_tokens - t0 : kLowbitTokens);
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
      float acc[kLowbitTokens] = {};
      for (int64_t k = 0; k < n_act; ++k) {
        Lowbit32 u;
        const __m256i q = UnpackLowbit32Fast<kType>(row + (k / kPerBlock) * l.bytes,
                                                    static_cast<int>(k % kPerBlock), &u);
        const __m256i absq = _mm256_abs_epi8(q);
        for (int t = 0; t < nt; ++t) {
          const Q8Block32& x = a[(t0 + t) * lda + k];
          const __m256i p = _mm256_madd_epi16(
              _mm256_maddubs_epi16(absq, _mm256_sign_epi8(LowbitLoad32(x.q), q)), ones);
          const int32_t s0 = LowbitSumLanes128(_mm256_castsi256_si128(p));
          const int32_t s1 = LowbitSumLanes128(_mm256_extracti128_si256(p, 1));
          acc[t] = Lowbit32Step<l.two_scales>(u, x.d, s0, s1, acc[t]);
        }
      }
      for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r] = acc[t];
    }
  }
}

// isa.h QGemmFn / QGemm32Fn over the low-bit types with the path's Prep256.
#define MX_LOWBIT_256_TYPES(X) \
  X(10) X(11) X(16) X(17) X(18) X(19) X(21) X(22) X(23) X(29) X(34) X(35)
#define MX_LOWBIT_32_TYPES(X) \
  X(39) X(40) X(41) X(42)  // IQ4_NL: qmatmul_avx2.cc, qmatmul32_avx512.cc

template <class Prep>
void LowbitQGemm(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                 const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  switch (static_cast<uint32_t>(type)) {
#define MX_CASE(id) \
  case id:          \
    return LowbitSweep256<Prep, id>(w, row_bytes, n_rows, n_blocks, a, lda, n_tokens, y, ldy);
    MX_LOWBIT_256_TYPES(MX_CASE)
#undef MX_CASE
    default:
      return;
  }
}
inline void LowbitQGemm32(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                          int64_t n_act, const Q8Block32* a, int64_t lda, int64_t n_tokens,
                          float* y, int64_t ldy) {
  switch (static_cast<uint32_t>(type)) {
#define MX_CASE(id) \
  case id:          \
    return LowbitSweep32<id>(w, row_bytes, n_rows, n_act, a, lda, n_tokens, y, ldy);
    MX_LOWBIT_32_TYPES(MX_CASE)
#undef MX_CASE
    default:
      return;
  }
}

}  // namespace
}  // namespace mx::kernels::internal
