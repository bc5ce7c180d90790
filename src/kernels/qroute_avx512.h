// Internal: how the AVX-512 integer kernels (qmatmul_avx512.cc for the
// K-quants, qmatmul32_avx512.cc for the 32-value block types) cover one
// product. Calls of fewer than kPanelMinTokens tokens run register tiles on
// the stored weights (decode); longer ones pack each group of kPanelRows rows
// once into a panel (bytes interleaved so one vpdpbusd covers 4 values x 16
// rows) and run every token tile over it. Both routes give the same bits;
// this only picks the faster one.
//
// A kernel family K provides
//   using Act = ...;   // activation block type (Q8KBlock, Q8Block32)
//   using Panel = ...; // one block of kPanelRows packed rows
//   template <int RM, int RN> static void Tile(w, row_bytes, n_blocks, a, lda, y, ldy);
//   static void Pack(w, row_bytes, rows, n_blocks, Panel* p);  // rows <= kPanelRows
//   template <int RN> static void PanelTile(p, n_blocks, a, lda, rows, y, ldy);
// Include only from files compiled with the AVX-512 flags (internal linkage).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/simd_avx512.h"
#include "kernels/tile_sweep.h"

namespace mx::kernels::internal {
namespace {

constexpr int kPanelRows = 16;
constexpr int64_t kPanelMinTokens = 12;  // calls with at least this many tokens pack panels
constexpr int kPanelTokens = 8;          // tokens per panel tile

template <class K>
struct DecodeTiles {
  const uint8_t* w;
  size_t row_bytes;
  int64_t n_blocks;
  const typename K::Act* a;
  int64_t lda;
  float* y;
  int64_t ldy;
  template <int RM, int RN>
  void Run(int64_t r, int64_t t) const {
    K::template Tile<RM, RN>(w + static_cast<size_t>(r) * row_bytes, row_bytes, n_blocks,
                             a + t * lda, lda, y + t * ldy + r, ldy);
  }
};

template <class K>
struct PanelTiles {
  const typename K::Panel* p;
  int64_t n_blocks;
  const typename K::Act* a;
  int64_t lda;
  int rows;
  float* y;
  int64_t ldy;
  template <int RN>
  void Run(int64_t t) const {
    K::template PanelTile<RN>(p, n_blocks, a + t * lda, lda, rows, y + t * ldy, ldy);
  }
};

// y[t * ldy + r] for r < n_rows, t < n_tokens (isa.h QGemmFn / QGemm32Fn).
template <class K>
void IntegerGemm(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
                 const typename K::Act* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  if (n_tokens < kPanelMinTokens) {
    SweepTiles<4>(n_rows, n_tokens, DecodeTiles<K>{w, row_bytes, n_blocks, a, lda, y, ldy});
    return;
  }
  using Panel = typename K::Panel;
  const int64_t n_groups = (n_rows + kPanelRows - 1) / kPanelRows;
  Panel* panel = static_cast<Panel*>(
      avx512::ThreadScratch(static_cast<size_t>(n_groups * n_blocks) * sizeof(Panel)));
  auto group_rows = [&](int64_t g) {
    const int64_t left = n_rows - g * kPanelRows;
    return static_cast<int>(left < kPanelRows ? left : kPanelRows);
  };
  for (int64_t g = 0; g < n_groups; ++g) {
    K::Pack(w + static_cast<size_t>(g * kPanelRows) * row_bytes, row_bytes, group_rows(g), n_blocks,
            panel + g * n_blocks);
  }
  for (int64_t g = 0; g < n_groups; ++g) {
    SweepTokens<kPanelTokens>(n_tokens, PanelTiles<K>{panel + g * n_blocks, n_blocks, a, lda,
                                                      group_rows(g), y + g * kPanelRows, ldy});
  }
}

}  // namespace
}  // namespace mx::kernels::internal
