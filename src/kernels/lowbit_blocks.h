// Internal: the low-bit weight types (Q2_K, Q3_K, TQ1_0, TQ2_0, the IQ
// types, MXFP4, NVFP4, Q1_0, Q2_0; ../shared/ref/README-quants.md gives
// every layout) in plain C++, as one unpacked form per activation kind:
//
//   Lowbit256 (Q8_K activations, 256 values): int8 q[256], an integer scale
//     per 16 values, and for Q2_K a min per 16: value i is
//       (d * sc[i / 16]) * q[i]  [- dmin * mn[i / 16]]
//   Lowbit32 (Q8_0 activations, 32 values, one activation block): int8
//     q[32], a float scale per 16 values: value i is d[i / 16] * q[i].
//
// Every type's dequantization formula of the README is that expression in
// that f32 order (the IQ types' 0.5 + ls, x0.25, x0.125 and IQ1's +-0.125
// delta only move powers of two between d, sc and q: IQ1 stores 8 g +- 1 and
// d / 8), so DequantBlocks of dequant_blocks.h reproduces ggml bit for bit
// from the unpacked form. The integer dot of one block against its
// activation block(s) is exact, and each output element is then
//
//   Lowbit256: acc = fma(a.d * d, (float)S, acc); Q2_K also
//              acc = fma(-(a.d * dmin), (float)M, acc)
//              S = sum_s sc_s * sum_{i in s} q_i a_i, M = sum_s mn_s bsum_s
//   Lowbit32:  acc = fma(a.d * d[0], (float)(S0 + S1), acc), or for NVFP4
//              (two scales) fma(a.d * d[0], S0) then fma(a.d * d[1], S1)
//
// block by block from 0.0f, the order qdot_blocks.h uses for the K-quants,
// so the scalar reference and the SIMD kernels (qmatmul_lowbit_*.cc) give
// the same bits. The tables are lowbit_tables.h's.
//
// Everything is in an anonymous namespace (see dequant_blocks.h / isa.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/lowbit_tables.h"

namespace mx::kernels::internal {
namespace {

namespace lowbit {
constexpr uint32_t kQ2K = 10, kQ3K = 11, kIQ2XXS = 16, kIQ2XS = 17, kIQ3XXS = 18, kIQ1S = 19,
                   kIQ4NL = 20, kIQ3S = 21, kIQ2S = 22, kIQ4XS = 23, kIQ1M = 29, kTQ1 = 34,
                   kTQ2 = 35, kMXFP4 = 39, kNVFP4 = 40, kQ1_0 = 41, kQ2_0 = 42;
}  // namespace lowbit

struct alignas(64) Lowbit256 {
  int8_t q[256];
  int16_t sc[16];
  int16_t mn[16];  // Q2_K only (zeros otherwise)
  float d, dmin;
};
struct alignas(32) Lowbit32 {
  int8_t q[32];
  float d[2];  // scale of values 0-15 and 16-31
};

// Geometry of a low-bit type: values and bytes per stored block, and which
// unpacked form it takes (kind 256 or 32; 0: not a low-bit type).
struct LowbitLayout {
  int kind;
  int values, bytes;
  bool has_min, two_scales;
};
constexpr LowbitLayout LowbitLayoutFor(uint32_t type_id) {
  using namespace lowbit;
  switch (type_id) {
    case kQ2K:
      return {256, 256, 84, true, false};
    case kQ3K:
      return {256, 256, 110, false, false};
    case kTQ1:
      return {256, 256, 54, false, false};
    case kTQ2:
      return {256, 256, 66, false, false};
    case kIQ2XXS:
      return {256, 256, 66, false, false};
    case kIQ2XS:
      return {256, 256, 74, false, false};
    case kIQ2S:
      return {256, 256, 82, false, false};
    case kIQ3XXS:
      return {256, 256, 98, false, false};
    case kIQ3S:
      return {256, 256, 110, false, false};
    case kIQ1S:
      return {256, 256, 50, false, false};
    case kIQ1M:
      return {256, 256, 56, false, false};
    case kIQ4XS:
      return {256, 256, 136, false, false};
    case kIQ4NL:
      return {32, 32, 18, false, false};
    case kMXFP4:
      return {32, 32, 17, false, false};
    case kNVFP4:
      return {32, 64, 36, false, true};
    case kQ1_0:
      return {32, 128, 18, false, false};
    case kQ2_0:
      return {32, 64, 18, false, false};
    default:
      return {0, 0, 0, false, false};
  }
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void SetScales16(Lowbit256* u, int ib, int sc0, int sc1) {
  u->sc[2 * ib] = static_cast<int16_t>(sc0);
  u->sc[2 * ib + 1] = static_cast<int16_t>(sc1);
}
// 8 grid values (the bytes of `grid`) with the signs of the 8 bits of `signs`.
inline void GridSigned8(uint64_t grid, uint8_t signs, int8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const int v = static_cast<int>((grid >> (8 * j)) & 0xFF);
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}
inline void GridSigned4x2(uint32_t g0, uint32_t g1, uint8_t signs, int8_t* q) {
  GridSigned8(static_cast<uint64_t>(g0) | (static_cast<uint64_t>(g1) << 32), signs, q);
}
// IQ1_S / IQ1_M: 8 * (grid value -1, 0, 1) +- 1 (the +-0.125 delta, times 8).
inline void Iq1Group(uint64_t grid, bool minus_delta, int8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const int g = static_cast<int8_t>((grid >> (8 * j)) & 0xFF);
    q[j] = static_cast<int8_t>(8 * g + (minus_delta ? -1 : 1));
  }
}

// One stored block of a kind-256 type in its unpacked form.
template <class Cvt>
void UnpackLowbit256(uint32_t type_id, const uint8_t* __restrict b, Lowbit256* __restrict u) {
  using namespace lowbit;
  std::memset(u->mn, 0, sizeof(u->mn));
  u->dmin = 0.0f;
  switch (type_id) {
    case kQ2K: {
      const uint8_t* qs = b + 16;
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 32; ++l)
            u->q[128 * h + 32 * j + l] = static_cast<int8_t>((qs[32 * h + l] >> (2 * j)) & 3);
      for (int s = 0; s < 16; ++s) {
        u->sc[s] = static_cast<int16_t>(b[s] & 15);
        u->mn[s] = static_cast<int16_t>(b[s] >> 4);
      }
      u->d = Cvt::Half(b + 80);
      u->dmin = Cvt::Half(b + 82);
      return;
    }
    case kQ3K: {
      const uint8_t* hm = b;
      const uint8_t* qs = b + 32;
      const uint8_t* sc = b + 96;
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 32; ++l) {
            const int lo = (qs[32 * h + l] >> (2 * j)) & 3;
            const int hi = (hm[l] >> (4 * h + j)) & 1;
            u->q[128 * h + 32 * j + l] = static_cast<int8_t>(lo - (hi ? 0 : 4));
          }
      for (int i = 0; i < 16; ++i) {
        const int low4 = i < 8 ? sc[i] & 15 : sc[i - 8] >> 4;
        const int high2 = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        u->sc[i] = static_cast<int16_t>((low4 | (high2 << 4)) - 32);
      }
      u->d = Cvt::Half(b + 108);
      return;
    }
    case kTQ1: {
      // A byte holds base-3 digits as a fixed-point fraction: digit n is
      // ((uint8)(byte * 3^n) * 3) >> 8.
      static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
      auto digit = [](uint8_t byte, int n) {
        const uint8_t shifted = static_cast<uint8_t>(byte * kPow3[n]);
        return static_cast<int8_t>(((static_cast<uint16_t>(shifted) * 3) >> 8) - 1);
      };
      for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 32; ++m) u->q[32 * n + m] = digit(b[m], n);
      for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 16; ++m) u->q[160 + 16 * n + m] = digit(b[32 + m], n);
      for (int n = 0; n < 4; ++n)
        for (int j = 0; j < 4; ++j) u->q[240 + 4 * n + j] = digit(b[48 + j], n);
      for (int s = 0; s < 16; ++s) u->sc[s] = 1;
      u->d = Cvt::Half(b + 52);
      return;
    }
    case kTQ2: {
      for (int c = 0; c < 2; ++c)
        for (int l = 0; l < 4; ++l)
          for (int m = 0; m < 32; ++m)
            u->q[128 * c + 32 * l + m] = static_cast<int8_t>(((b[32 * c + m] >> (2 * l)) & 3) - 1);
      for (int s = 0; s < 16; ++s) u->sc[s] = 1;
      u->d = Cvt::Half(b + 64);
      return;
    }
    case kIQ2XXS: {
      for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* g = b + 2 + 8 * ib;
        const uint32_t s = LoadU32(g + 4);
        const int ls = 2 * static_cast<int>(s >> 28) + 1;
        SetScales16(u, ib, ls, ls);
        for (int l = 0; l < 4; ++l)
          GridSigned8(kIq2xxsGrid[g[l]], kSignsIq2xs[(s >> (7 * l)) & 127], u->q + 32 * ib + 8 * l);
      }
      u->d = Cvt::Half(b) * 0.125f;
      return;
    }
    case kIQ2XS: {
      for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[66 + ib];
        SetScales16(u, ib, 2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
        for (int l = 0; l < 4; ++l) {
          const uint16_t q = LoadU16(b + 2 + 2 * (4 * ib + l));
          GridSigned8(kIq2xsGrid[q & 511], kSignsIq2xs[q >> 9], u->q + 32 * ib + 8 * l);
        }
      }
      u->d = Cvt::Half(b) * 0.125f;
      return;
    }
    case kIQ2S: {
      const uint8_t* qs = b + 2;
      const uint8_t* signs = b + 34;
      const uint8_t* qh = b + 66;
      for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[74 + ib];
        SetScales16(u, ib, 2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
        for (int l = 0; l < 4; ++l) {
          const int idx = qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
          GridSigned8(kIq2sGrid[idx], signs[4 * ib + l], u->q + 32 * ib + 8 * l);
        }
      }
      u->d = Cvt::Half(b) * 0.125f;
      return;
    }
    case kIQ3XXS: {
      const uint8_t* qs = b + 2;
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t s = LoadU32(b + 66 + 4 * ib);
        const int ls = 2 * static_cast<int>(s >> 28) + 1;
        SetScales16(u, ib, ls, ls);
        for (int l = 0; l < 4; ++l) {
          GridSigned4x2(kIq3xxsGrid[qs[8 * ib + 2 * l]], kIq3xxsGrid[qs[8 * ib + 2 * l + 1]],
                        kSignsIq2xs[(s >> (7 * l)) & 127], u->q + 32 * ib + 8 * l);
        }
      }
      u->d = Cvt::Half(b) * 0.25f;
      return;
    }
    case kIQ3S: {
      const uint8_t* qs = b + 2;
      const uint8_t* qh = b + 66;
      const uint8_t* signs = b + 74;
      for (int g = 0; g < 8; ++g) {
        const int nibble = (b[106 + g / 2] >> (4 * (g % 2))) & 15;
        SetScales16(u, g, 1 + 2 * nibble, 1 + 2 * nibble);
        for (int l = 0; l < 4; ++l) {
          const int i0 = qs[8 * g + 2 * l] | ((qh[g] << (8 - 2 * l)) & 256);
          const int i1 = qs[8 * g + 2 * l + 1] | ((qh[g] << (7 - 2 * l)) & 256);
          GridSigned4x2(kIq3sGrid[i0], kIq3sGrid[i1], signs[4 * g + l], u->q + 32 * g + 8 * l);
        }
      }
      u->d = Cvt::Half(b);
      return;
    }
    case kIQ1S: {
      const uint8_t* qs = b + 2;
      for (int ib = 0; ib < 8; ++ib) {
        const uint16_t h = LoadU16(b + 34 + 2 * ib);
        const int ls = 2 * ((h >> 12) & 7) + 1;
        SetScales16(u, ib, ls, ls);
        for (int l = 0; l < 4; ++l) {
          const int idx = qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8);
          Iq1Group(kIq1sGrid[idx], (h & 0x8000) != 0, u->q + 32 * ib + 8 * l);
        }
      }
      u->d = Cvt::Half(b) * 0.125f;
      return;
    }
    case kIQ1M: {
      const uint8_t* qs = b;
      const uint8_t* qh = b + 32;
      uint16_t sc[4];
      for (int i = 0; i < 4; ++i) sc[i] = LoadU16(b + 48 + 2 * i);
      const uint16_t bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                                  ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
      uint8_t half[2];
      std::memcpy(half, &bits, 2);
      for (int ib = 0; ib < 8; ++ib) {
        const int s = sc[ib / 2] >> (6 * (ib % 2));
        SetScales16(u, ib, 2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1);
        for (int k = 0; k < 2; ++k) {
          const uint8_t h = qh[2 * ib + k];
          Iq1Group(kIq1sGrid[qs[4 * ib + 2 * k] | ((h << 8) & 0x700)], (h & 0x08) != 0,
                   u->q + 32 * ib + 16 * k);
          Iq1Group(kIq1sGrid[qs[4 * ib + 2 * k + 1] | ((h << 4) & 0x700)], (h & 0x80) != 0,
                   u->q + 32 * ib + 16 * k + 8);
        }
      }
      u->d = Cvt::Half(half) * 0.125f;
      return;
    }
    case kIQ4XS: {
      const uint16_t scales_h = LoadU16(b + 2);
      const uint8_t* qs = b + 8;
      for (int ib = 0; ib < 8; ++ib) {
        const int ls =
            ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4);
        SetScales16(u, ib, ls - 32, ls - 32);
        for (int j = 0; j < 16; ++j) {
          u->q[32 * ib + j] = kValuesIq4nl[qs[16 * ib + j] & 15];
          u->q[32 * ib + 16 + j] = kValuesIq4nl[qs[16 * ib + j] >> 4];
        }
      }
      u->d = Cvt::Half(b);
      return;
    }
    default:
      std::memset(u, 0, sizeof(*u));
      return;
  }
}

// MXFP4's E8M0 scale 2^(e - 128) (the table is doubled), built from bits.
inline float E8m0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// NVFP4's UE4M3 scale, halved (the table is doubled); bit 7 is ignored.
inline float Ue4m3Half(uint8_t u) {
  if (u == 0 || u == 0x7F) return 0.0f;
  const int e = (u >> 3) & 15, m = u & 7;
  const float raw = e == 0
                        ? static_cast<float>(m) * 0x1p-9f
                        : (1.0f + static_cast<float>(m) * 0.125f) * __builtin_ldexpf(1.0f, e - 7);
  return raw * 0.5f;
}

// 32 values (activation block `c` of the row, c counted from the block at
// b: c < values / 32) of a kind-32 type in their unpacked form.
template <class Cvt>
void UnpackLowbit32(uint32_t type_id, const uint8_t* __restrict b, int c, Lowbit32* __restrict u) {
  using namespace lowbit;
  switch (type_id) {
    case kIQ4NL:
    case kMXFP4: {
      const int8_t* kv = type_id == kIQ4NL ? kValuesIq4nl : kValuesFp4;
      const uint8_t* qs = b + (type_id == kIQ4NL ? 2 : 1);
      for (int j = 0; j < 16; ++j) {
        u->q[j] = kv[qs[j] & 15];
        u->q[j + 16] = kv[qs[j] >> 4];
      }
      u->d[0] = u->d[1] = type_id == kIQ4NL ? Cvt::Half(b) : E8m0Half(b[0]);
      return;
    }
    case kNVFP4: {
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * c + h;
        const uint8_t* qs = b + 4 + 8 * s;
        for (int j = 0; j < 8; ++j) {
          u->q[16 * h + j] = kValuesFp4[qs[j] & 15];
          u->q[16 * h + 8 + j] = kValuesFp4[qs[j] >> 4];
        }
        u->d[h] = Ue4m3Half(b[s]);
      }
      return;
    }
    case kQ1_0: {
      const uint8_t* qs = b + 2 + 4 * c;
      for (int j = 0; j < 32; ++j)
        u->q[j] = static_cast<int8_t>((qs[j / 8] >> (j % 8)) & 1 ? 1 : -1);
      u->d[0] = u->d[1] = Cvt::Half(b);
      return;
    }
    case kQ2_0: {
      const uint8_t* qs = b + 2 + 8 * c;
      for (int j = 0; j < 32; ++j)
        u->q[j] = static_cast<int8_t>(((qs[j / 4] >> (2 * (j % 4))) & 3) - 1);
      u->d[0] = u->d[1] = Cvt::Half(b);
      return;
    }
    default:
      std::memset(u, 0, sizeof(*u));
      return;
  }
}

// Dequantization of one stored block (dequant_blocks.h BlockDequantFn).
template <class Cvt, uint32_t kType>
void DequantBlockLowbit(const uint8_t* __restrict b, float* __restrict y) {
  constexpr LowbitLayout l = LowbitLayoutFor(kType);
  if constexpr (l.kind == 256) {
    Lowbit256 u;
    UnpackLowbit256<Cvt>(kType, b, &u);
    for (int s = 0; s < 16; ++s) {
      const float ds = u.d * static_cast<float>(u.sc[s]);
      if constexpr (l.has_min) {
        const float ms = u.dmin * static_cast<float>(u.mn[s]);
        for (int i = 0; i < 16; ++i) y[16 * s + i] = ds * static_cast<float>(u.q[16 * s + i]) - ms;
      } else {
        for (int i = 0; i < 16; ++i) y[16 * s + i] = ds * static_cast<float>(u.q[16 * s + i]);
      }
    }
  } else {
    for (int c = 0; c < l.values / 32; ++c) {
      Lowbit32 u;
      UnpackLowbit32<Cvt>(kType, b, c, &u);
      for (int i = 0; i < 32; ++i) y[32 * c + i] = u.d[i / 16] * static_cast<float>(u.q[i]);
    }
  }
}

// Integer sums of one kind-256 block against its Q8_K activation block.
template <class Act>
inline void Lowbit256Sums(const Lowbit256& __restrict u, const Act& __restrict a, int32_t* s,
                          int32_t* m) {
  int32_t sum = 0, mins = 0;
  for (int g = 0; g < 16; ++g) {
    int32_t p = 0;
    for (int i = 0; i < 16; ++i) p += u.q[16 * g + i] * a.q[16 * g + i];
    sum += u.sc[g] * p;
    mins += u.mn[g] * a.bsums[g];
  }
  *s = sum;
  *m = mins;
}

// The block step of the file comment, for one (row, token) and block.
template <bool kHasMin>
inline float Lowbit256Step(const Lowbit256& u, float a_d, int32_t s, int32_t m, float acc) {
  acc = __builtin_fmaf(a_d * u.d, static_cast<float>(s), acc);
  if (kHasMin) acc = __builtin_fmaf(-(a_d * u.dmin), static_cast<float>(m), acc);
  return acc;
}
template <bool kTwoScales>
inline float Lowbit32Step(const Lowbit32& u, float a_d, int32_t s0, int32_t s1, float acc) {
  if (kTwoScales) {
    acc = __builtin_fmaf(a_d * u.d[0], static_cast<float>(s0), acc);
    return __builtin_fmaf(a_d * u.d[1], static_cast<float>(s1), acc);
  }
  return __builtin_fmaf(a_d * u.d[0], static_cast<float>(s0 + s1), acc);
}

// One output element of a kind-256 type: a row of n_blocks stored blocks
// against one token's Q8_K blocks.
template <class Cvt, class Act>
float LowbitDotRow256(uint32_t type_id, const uint8_t* row, const Act* a, int64_t n_blocks) {
  const LowbitLayout l = LowbitLayoutFor(type_id);
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    Lowbit256 u;
    UnpackLowbit256<Cvt>(type_id, row + ib * l.bytes, &u);
    int32_t s, m;
    Lowbit256Sums(u, a[ib], &s, &m);
    acc = l.has_min ? Lowbit256Step<true>(u, a[ib].d, s, m, acc)
                    : Lowbit256Step<false>(u, a[ib].d, s, m, acc);
  }
  return acc;
}

// One output element of a kind-32 type: n_act activation blocks (Q8_0, 32
// values each) of one token against the row's values.
template <class Cvt, class Act>
float LowbitDotRow32(uint32_t type_id, const uint8_t* row, const Act* a, int64_t n_act) {
  const LowbitLayout l = LowbitLayoutFor(type_id);
  const int per_block = l.values / 32;
  float acc = 0.0f;
  for (int64_t k = 0; k < n_act; ++k) {
    Lowbit32 u;
    UnpackLowbit32<Cvt>(type_id, row + (k / per_block) * l.bytes, static_cast<int>(k % per_block),
                        &u);
    int32_t s0 = 0, s1 = 0;
    for (int i = 0; i < 16; ++i) s0 += u.q[i] * a[k].q[i];
    for (int i = 16; i < 32; ++i) s1 += u.q[i] * a[k].q[i];
    acc = l.two_scales ? Lowbit32Step<true>(u, a[k].d, s0, s1, acc)
                       : Lowbit32Step<false>(u, a[k].d, s0, s1, acc);
  }
  return acc;
}

}  // namespace
}  // namespace mx::kernels::internal
