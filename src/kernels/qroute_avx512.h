// Internal: how the AVX-512 integer kernels (qmatmul_avx512.cc for the
// K-quants, qmatmul32_avx512.cc for the 32-value block types) cover one
// product. Calls of fewer than kPanelMinTokens tokens run register tiles on
// the stored weights (decode); longer ones pack each group of kPanelRows rows
// once into a panel (bytes interleaved so one vpdpbusd covers 4 values x 16
// rows) and run token tiles over pairs of panels (32 rows; a last odd panel
// alone). Both routes give the same bits; this only picks the faster one.
//
// Tokens go in chunks whose activations stay in L2 while every panel pair
// reads them; the reduction over blocks is cut into passes of a few blocks,
// so the panels' blocks of one pass stay in L1 while every token tile of
// the chunk reads them, and between passes a tile's f32 accumulators wait
// in a small buffer. Each output element still takes its blocks' f32 steps
// in block order, from 0.0f, whatever the chunk, pass or tile (batch
// invariance). The first chunk packs each pair of panels right before its
// tiles and prefetches the next pair's stored rows meanwhile.
//
// A kernel family K provides
//   using Act = ...;   // activation block type (Q8KBlock, Q8Block32)
//   using Panel = ...; // one block of kPanelRows packed rows
//   static constexpr int kAuxInts;  // per (token, block) int32s of PrepareTokens
//   static constexpr size_t kBlockBytes;  // bytes of one stored weight block
//   static constexpr int kPairTokens, kSingleTokens;  // token tiles for 2 / 1 panels
//   template <int RM, int RN> static void Tile(w, row_bytes, n_blocks, a, lda, y, ldy);
//   static void Pack(w, row_bytes, rows, n_blocks, Panel* p);  // rows <= kPanelRows
//   static void PrepareTokens(a, lda, n_tokens, n_blocks, int32_t* aux);  // aux[block][token][]
//   template <int NP, int RN> static void PanelTile(const PanelPass<K>&, t, int rows, y, ldy);
// Include only from files compiled with the AVX-512 flags (internal linkage).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/simd_avx512.h"
#include "kernels/tile_sweep.h"

namespace mx::kernels::internal {
namespace {

constexpr int kPanelRows = 16;
constexpr int64_t kPanelMinTokens = 12;         // calls with at least this many tokens pack panels
constexpr size_t kPassPanelBytes = 48 << 10;    // panel bytes one pass reads (L1 size)
constexpr size_t kChunkActBytes = 256 << 10;    // activation bytes of one token chunk (in L2)
constexpr int64_t kChunkMultiple = 24;          // token chunks are multiples of every tile
constexpr int64_t kAccFloats = 2 * kPanelRows;  // partial sums per token between passes

// One pass of token tiles over NP panels: blocks [ib0, ib0 + n_blocks).
template <class K>
struct PanelPass {
  const typename K::Panel* p;  // the first panel's block ib0; panel n at p + n * panel_stride
  int64_t panel_stride;        // blocks per panel
  int64_t n_blocks;
  const typename K::Act* a;  // token 0's block ib0; token t at a + t * lda
  int64_t lda;
  const int32_t* aux;  // K::PrepareTokens' ints of block ib0, token 0
  int64_t aux_stride;  // ints from one block's aux to the next's
  // Null on the first pass (accumulators start at 0.0f), else token t's
  // partial sums of the earlier passes at acc + t * kAccFloats.
  const float* acc;
};

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

template <class K, int NP>
struct PanelTiles {
  const PanelPass<K>* pass;
  int rows;  // rows of the NP panels that exist (the rest are padding)
  float* y;  // the pass's sums: the partial sums' buffer, or the output after the last pass
  int64_t ldy;
  template <int RN>
  void Run(int64_t t) const {
    K::template PanelTile<NP, RN>(*pass, t, rows, y + t * ldy, ldy);
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
  const size_t panel_bytes = static_cast<size_t>(n_groups * n_blocks) * sizeof(Panel);
  const size_t aux_bytes =  // a multiple of 64, so the partial sums after it are aligned
      (static_cast<size_t>(n_tokens * n_blocks * K::kAuxInts) * 4 + 63) / 64 * 64;
  // Token chunks whose activations stay in L2 while every panel pair reads them.
  const int64_t chunk = std::max<int64_t>(
      kChunkMultiple, static_cast<int64_t>(kChunkActBytes / (n_blocks * sizeof(typename K::Act))) /
                          kChunkMultiple * kChunkMultiple);
  // Partial sums between passes wait in a buffer of their own: in y (rows
  // often a multiple of 1024 apart) the next tile's loads would alias the
  // last tile's stores in the 4 KiB the CPU compares.
  const size_t acc_bytes = static_cast<size_t>(std::min(chunk, n_tokens) * kAccFloats) * 4;
  auto* scratch = static_cast<uint8_t*>(avx512::ThreadScratch(panel_bytes + aux_bytes + acc_bytes));
  Panel* panel = reinterpret_cast<Panel*>(scratch);
  int32_t* aux = reinterpret_cast<int32_t*>(scratch + panel_bytes);
  float* acc = reinterpret_cast<float*>(scratch + panel_bytes + aux_bytes);
  auto group_rows = [&](int64_t g) {
    const int64_t left = n_rows - g * kPanelRows;
    return static_cast<int>(left < kPanelRows ? left : kPanelRows);
  };
  auto pack = [&](int64_t g) {
    K::Pack(w + static_cast<size_t>(g * kPanelRows) * row_bytes, row_bytes, group_rows(g), n_blocks,
            panel + g * n_blocks);
  };
  // The stored rows of groups [g, g + 2) towards L2, while the tiles of the
  // groups before them run (packing them is then no wait on memory).
  auto prefetch = [&](int64_t g) {
    const int64_t r1 = std::min<int64_t>(n_rows, (g + 2) * kPanelRows);
    const size_t bytes = static_cast<size_t>(n_blocks) * K::kBlockBytes;
    for (int64_t r = g * kPanelRows; r < r1; ++r) {
      const char* row = reinterpret_cast<const char*>(w + static_cast<size_t>(r) * row_bytes);
      for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + o, _MM_HINT_T1);
      _mm_prefetch(row + bytes - 1, _MM_HINT_T1);
    }
  };
  const int64_t aux_stride = n_tokens * K::kAuxInts;
  auto run = [&](int64_t g, int64_t t0, int64_t nt, auto np) {
    constexpr int kNp = decltype(np)::value;
    const int rows = static_cast<int>(std::min<int64_t>(n_rows - g * kPanelRows, kNp * kPanelRows));
    const int64_t pass_blocks =
        std::max<int64_t>(1, static_cast<int64_t>(kPassPanelBytes / (kNp * sizeof(Panel))));
    float* yg = y + t0 * ldy + g * kPanelRows;
    for (int64_t ib = 0; ib < n_blocks; ib += pass_blocks) {
      const PanelPass<K> pass{panel + g * n_blocks + ib,
                              n_blocks,
                              std::min(pass_blocks, n_blocks - ib),
                              a + t0 * lda + ib,
                              lda,
                              aux + ib * aux_stride + t0 * K::kAuxInts,
                              aux_stride,
                              ib == 0 ? nullptr : acc};
      const bool last = ib + pass_blocks >= n_blocks;
      float* out = last ? yg : acc;
      const int64_t ld_out = last ? ldy : kAccFloats;
      if constexpr (kNp == 2) {
        SweepTokens<K::kPairTokens>(nt, PanelTiles<K, 2>{&pass, rows, out, ld_out});
      } else {
        SweepTokens<K::kSingleTokens>(nt, PanelTiles<K, 1>{&pass, rows, out, ld_out});
      }
    }
  };
  // The first chunk packs each pair of groups right before its tiles (the
  // first pair's rows come in while the tokens are prepared).
  prefetch(0);
  K::PrepareTokens(a, lda, n_tokens, n_blocks, aux);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += chunk) {
    const int64_t nt = std::min(chunk, n_tokens - t0);
    for (int64_t g = 0; g < n_groups; g += 2) {
      if (t0 == 0) {
        pack(g);
        if (g + 1 < n_groups) pack(g + 1);
        if (g + 2 < n_groups) prefetch(g + 2);
      }
      if (g + 1 < n_groups) {
        run(g, t0, nt, std::integral_constant<int, 2>{});
      } else {
        run(g, t0, nt, std::integral_constant<int, 1>{});
      }
    }
  }
}

}  // namespace
}  // namespace mx::kernels::internal
