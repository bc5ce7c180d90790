// Internal: dequantization of one ggml block (ENGINE-FACTS §2) in plain C++
// written so the compiler vectorises it. quant.cc compiles it as the scalar
// reference; the SIMD files compile their own copies with their flags, so all
// paths compute the same f32 expressions in the same order (ggml's order) and
// agree bit for bit. Cvt::Half(p) reads an fp16 at p as f32 (exact); each
// includer supplies one that is safe for its instruction set.
//
// Everything is in an anonymous namespace: every includer gets a private copy
// (no inline function compiled for AVX-512 can leak to other callers).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/lowbit_blocks.h"

namespace mx::kernels::internal {
namespace {

template <class Cvt>
void DequantBlockQ4_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = Cvt::Half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
  for (int j = 0; j < 16; ++j) y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
}

template <class Cvt>
void DequantBlockQ4_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = Cvt::Half(b), m = Cvt::Half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
  for (int j = 0; j < 16; ++j) y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
}

// Q5_0 / Q5_1: bit j of qh is the fifth bit of value j.
template <class Cvt, bool kHasMin>
void DequantBlockQ5(const uint8_t* __restrict b, float* __restrict y) {
  const float d = Cvt::Half(b);
  const float m = kHasMin ? Cvt::Half(b + 2) : 0.0f;
  uint32_t qh;
  std::memcpy(&qh, b + (kHasMin ? 4 : 2), 4);
  const uint8_t* qs = b + (kHasMin ? 8 : 6);
  for (int j = 0; j < 16; ++j) {
    const int q = (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
    y[j] = kHasMin ? static_cast<float>(q) * d + m : static_cast<float>(q - 16) * d;
  }
  for (int j = 0; j < 16; ++j) {
    const int q = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j + 16] = kHasMin ? static_cast<float>(q) * d + m : static_cast<float>(q - 16) * d;
  }
}

template <class Cvt>
void DequantBlockQ8_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = Cvt::Half(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// Q4_K / Q5_K 6-bit scale and min of sub-block s (get_scale_min_k4).
inline void KScaleMin(int s, const uint8_t* q, int* sc, int* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// All 8 six-bit scales and mins of a Q4_K / Q5_K block at once (KScaleMin
// for s = 0..7): byte s of .sc / .m, four bytes at a time.
struct KScalesMins {
  uint64_t sc, m;
};
inline KScalesMins KScalesMinsOf(const uint8_t* block) {
  uint32_t u[3];
  std::memcpy(u, block + 4, 12);
  constexpr uint32_t k6 = 0x3F3F3F3Fu, k4 = 0x0F0F0F0Fu, k2 = 0x03030303u;
  return {static_cast<uint64_t>(u[0] & k6) |
              static_cast<uint64_t>((u[2] & k4) | (((u[0] >> 6) & k2) << 4)) << 32,
          static_cast<uint64_t>(u[1] & k6) |
              static_cast<uint64_t>(((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4)) << 32};
}

// Q4_K (kFive = false) / Q5_K: x = (d * sc) * q - dmin * m, in that f32 order.
template <class Cvt, bool kFive>
void DequantBlockQxK(const uint8_t* __restrict b, float* __restrict y) {
  const float d = Cvt::Half(b), dmin = Cvt::Half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFive ? 48 : 16);
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    KScaleMin(2 * c, scales, &sc0, &m0);
    KScaleMin(2 * c + 1, scales, &sc1, &m1);
    const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
    const uint8_t* q = qs + 32 * c;
    float* out = y + 64 * c;
    for (int l = 0; l < 32; ++l) {
      const int hi = kFive ? ((qh[l] >> (2 * c)) & 1) << 4 : 0;
      out[l] = d0 * static_cast<float>((q[l] & 0xF) + hi) - mm0;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = kFive ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0;
      out[32 + l] = d1 * static_cast<float>((q[l] >> 4) + hi) - mm1;
    }
  }
}

// Q6_K: x = (d * sc) * q with q = 6-bit value - 32; 16 values share a scale.
template <class Cvt>
void DequantBlockQ6K(const uint8_t* __restrict b, float* __restrict y) {
  const float d = Cvt::Half(b + 208);
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b + 64 * n;
    const uint8_t* qh = b + 128 + 32 * n;
    float* out = y + 128 * n;
    for (int half = 0; half < 2; ++half) {
      // Quarter k of this 128 (k = 0..3) holds values 32k + l; scale 8n + 2k + half.
      const float ds0 = d * static_cast<float>(sc[8 * n + 0 + half]);
      const float ds1 = d * static_cast<float>(sc[8 * n + 2 + half]);
      const float ds2 = d * static_cast<float>(sc[8 * n + 4 + half]);
      const float ds3 = d * static_cast<float>(sc[8 * n + 6 + half]);
      for (int i = 0; i < 16; ++i) {
        const int l = 16 * half + i;
        const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = ds0 * static_cast<float>(q0);
        out[l + 32] = ds1 * static_cast<float>(q1);
        out[l + 64] = ds2 * static_cast<float>(q2);
        out[l + 96] = ds3 * static_cast<float>(q3);
      }
    }
  }
}

using BlockDequantFn = void (*)(const uint8_t*, float*);
struct BlockDequant {
  BlockDequantFn fn;  // null: type not handled
  int64_t values;     // per block
  int64_t bytes;      // per block
};

// The block function and geometry for ggml type id `type_id`. (Geometry is
// repeated here rather than taken from core/dtype.h so the SIMD files call
// no inline function of another header; see isa.h.)
template <class Cvt>
BlockDequant BlockDequantFor(uint32_t type_id) {
  switch (type_id) {
    case 2:
      return {DequantBlockQ4_0<Cvt>, 32, 18};
    case 3:
      return {DequantBlockQ4_1<Cvt>, 32, 20};
    case 6:
      return {DequantBlockQ5<Cvt, false>, 32, 22};
    case 7:
      return {DequantBlockQ5<Cvt, true>, 32, 24};
    case 8:
      return {DequantBlockQ8_0<Cvt>, 32, 34};
    case 12:
      return {DequantBlockQxK<Cvt, false>, 256, 144};
    case 13:
      return {DequantBlockQxK<Cvt, true>, 256, 176};
    case 14:
      return {DequantBlockQ6K<Cvt>, 256, 210};
#define MX_LOWBIT_CASE(id) \
  case id:                 \
    return {DequantBlockLowbit<Cvt, id>, LowbitLayoutFor(id).values, LowbitLayoutFor(id).bytes};
      MX_LOWBIT_CASE(10)  // Q2_K
      MX_LOWBIT_CASE(11)  // Q3_K
      MX_LOWBIT_CASE(16)  // IQ2_XXS
      MX_LOWBIT_CASE(17)  // IQ2_XS
      MX_LOWBIT_CASE(18)  // IQ3_XXS
      MX_LOWBIT_CASE(19)  // IQ1_S
      MX_LOWBIT_CASE(20)  // IQ4_NL
      MX_LOWBIT_CASE(21)  // IQ3_S
      MX_LOWBIT_CASE(22)  // IQ2_S
      MX_LOWBIT_CASE(23)  // IQ4_XS
      MX_LOWBIT_CASE(29)  // IQ1_M
      MX_LOWBIT_CASE(34)  // TQ1_0
      MX_LOWBIT_CASE(35)  // TQ2_0
      MX_LOWBIT_CASE(39)  // MXFP4
      MX_LOWBIT_CASE(40)  // NVFP4
      MX_LOWBIT_CASE(41)  // Q1_0
      MX_LOWBIT_CASE(42)  // Q2_0
#undef MX_LOWBIT_CASE
    default:
      return {nullptr, 0, 0};
  }
}

// n values (a multiple of the block size) of type `type_id`; false when the
// type is not a block type handled here.
template <class Cvt>
bool DequantBlocks(uint32_t type_id, const uint8_t* src, float* dst, int64_t n) {
  const BlockDequant b = BlockDequantFor<Cvt>(type_id);
  if (b.fn == nullptr || n % b.values != 0) return false;
  for (int64_t i = 0; i < n / b.values; ++i) b.fn(src + i * b.bytes, dst + i * b.values);
  return true;
}

}  // namespace
}  // namespace mx::kernels::internal
