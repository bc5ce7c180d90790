// AVX2 matmul: register tiles of up to 4 weight rows x 3 tokens (8 rows x 1
// token for decode), each accumulator one (row, token) pair with 8 lanes.
//
// Fixed reduction order (batch invariance): for every output element,
//   acc = 0; for k = 0, 8, 16, ...: acc = fma(w[k..k+8), x[k..k+8), acc)
// with the last partial step zero-filled, then HSum(acc). Every tile shape
// runs exactly that per-element sequence, and all weight loaders give the
// exact dequantized f32 values (as quant.cc), so the value of y[t, r] never
// depends on the tile it was computed in.
#include "kernels/dequant_blocks.h"
#include "kernels/isa.h"
#include "kernels/simd_avx2.h"
#include "kernels/tile_sweep.h"

namespace mx::kernels::internal {
namespace {

using avx2::FirstLanes;
using avx2::HSum4;
using avx2::LoadBF16;
using avx2::LoadF16;
using avx2::LoadF32;
using avx2::LoadQ8_0;

// One register tile: RM rows (row r at w + r * row_bytes) x RN tokens.
template <class L, int RM, int RN>
void Tile(const uint8_t* w, size_t row_bytes, int64_t n_cols, const float* x, int64_t ldx, float* y,
          int64_t ldy) {
  const uint8_t* rows[RM];
  const float* xs[RN];
  __m256 acc[RM][RN];
#pragma GCC unroll 8
  for (int r = 0; r < RM; ++r) rows[r] = w + static_cast<size_t>(r) * row_bytes;
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) xs[t] = x + t * ldx;
#pragma GCC unroll 8
  for (int r = 0; r < RM; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= n_cols; k += 8) {
    __m256 xv[RN];
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) xv[t] = _mm256_loadu_ps(xs[t] + k);
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const __m256 wv = L::Full(rows[r], k);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (k < n_cols) {
    const int64_t count = n_cols - k;
    const __m256i m = FirstLanes(count);
    __m256 xv[RN];
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) xv[t] = _mm256_maskload_ps(xs[t] + k, m);
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const __m256 wv = L::Part(rows[r], k, count);
#pragma GCC unroll 8
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  // Sums of 4 rows at once (same per-element order as HSum); missing rows
  // of a short tile are zero vectors whose sums are not stored.
  const __m256 zero = _mm256_setzero_ps();
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
        _mm_maskstore_ps(out, _mm256_castsi256_si128(FirstLanes(n)), s);
      }
    }
  }
}

// One product's register tiles for SweepTiles (tile_sweep.h).
template <class L>
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
    Tile<L, RM, RN>(w + static_cast<size_t>(r) * row_bytes, row_bytes, n_cols, x + t * ldx, ldx,
                    y + t * ldy + r, ldy);
  }
};
template <class L, int kMaxTokens>
void Sweep(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols, const float* x,
           int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  SweepTiles<kMaxTokens>(n_rows, n_tokens, Tiles<L>{w, row_bytes, n_cols, x, ldx, y, ldy});
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
constexpr int kDirectTokens = 3;

}  // namespace

bool GemmAvx2(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
              const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  switch (type) {
    case DType::kF32:
      Sweep<LoadF32, 3>(w, row_bytes, n_rows, n_cols, x, ldx, n_tokens, y, ldy);
      return true;
    case DType::kF16:
      Sweep<LoadF16, kDirectTokens>(w, row_bytes, n_rows, n_cols, x, ldx, n_tokens, y, ldy);
      return true;
    case DType::kBF16:
      Sweep<LoadBF16, kDirectTokens>(w, row_bytes, n_rows, n_cols, x, ldx, n_tokens, y, ldy);
      return true;
    default:
      return false;
  }
}

// Exact conversions to f32 for the matmul panels and DequantizeRow.
bool DequantAvx2(DType type, const uint8_t* src, float* dst, int64_t n) {
  int64_t k = 0;
  switch (type) {
    case DType::kF16:
      for (; k + 8 <= n; k += 8) _mm256_storeu_ps(dst + k, LoadF16::Full(src, k));
      if (k < n) _mm256_maskstore_ps(dst + k, FirstLanes(n - k), LoadF16::Part(src, k, n - k));
      return true;
    case DType::kBF16:
      for (; k + 8 <= n; k += 8) _mm256_storeu_ps(dst + k, LoadBF16::Full(src, k));
      if (k < n) _mm256_maskstore_ps(dst + k, FirstLanes(n - k), LoadBF16::Part(src, k, n - k));
      return true;
    case DType::kQ8_0:
      if (n % 32 != 0) return false;
      for (; k < n; k += 8) _mm256_storeu_ps(dst + k, LoadQ8_0::Full(src, k));
      return true;
    default:
      break;
  }
  // Other block types: dequant_blocks.h compiled for this instruction set.
  return DequantBlocks<F16cCvt>(static_cast<uint32_t>(type), src, dst, n);
}

}  // namespace mx::kernels::internal
