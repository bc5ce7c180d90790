// Internal: the loop that covers an (n_rows x n_tokens) output with register
// tiles whose sizes are compile-time constants, shared by the matmul kernels
// of every path. Token tiles are the outer loop (their activations stay in
// L1 while the rows stream by); within a token tile, rows go in tiles of
// kRows, then one smaller tile for the rest, and the last token tile is
// smaller too. Each tile size is its own instantiation of the kernel.
//
// Plain templates in an anonymous namespace: every includer (each compiled
// with its own instruction-set flags) gets a private copy (see isa.h).
#pragma once

#include <cstdint>

namespace mx::kernels::internal {
namespace {

// Rows per tile for RN tokens: more rows for decode (more independent
// accumulator chains), fewer when several tokens share each weight load.
template <int RN>
constexpr int kSweepRows = RN == 1 ? 8 : 4;

template <int RN, int M, class Tile>
inline void SweepRowTail(int64_t rem, int64_t r, int64_t t, const Tile& tile) {
  if constexpr (M > 0) {
    if (rem == M) {
      tile.template Run<M, RN>(r, t);
    } else {
      SweepRowTail<RN, M - 1>(rem, r, t, tile);
    }
  }
}
template <int RN, class Tile>
inline void SweepRows(int64_t n_rows, int64_t t, const Tile& tile) {
  constexpr int kRows = kSweepRows<RN>;
  int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) tile.template Run<kRows, RN>(r, t);
  SweepRowTail<RN, kRows - 1>(n_rows - r, r, t, tile);
}
template <int RN, class Tile>
inline void SweepTokenTail(int64_t rem, int64_t n_rows, int64_t t, const Tile& tile) {
  if constexpr (RN > 0) {
    if (rem == RN) {
      SweepRows<RN>(n_rows, t, tile);
    } else {
      SweepTokenTail<RN - 1>(rem, n_rows, t, tile);
    }
  }
}

// tile.template Run<RM, RN>(r, t) computes rows [r, r + RM) for tokens
// [t, t + RN); every (row, token) of the grid is covered exactly once.
template <int kTokens, class Tile>
void SweepTiles(int64_t n_rows, int64_t n_tokens, const Tile& tile) {
  int64_t t = 0;
  for (; t + kTokens <= n_tokens; t += kTokens) SweepRows<kTokens>(n_rows, t, tile);
  SweepTokenTail<kTokens - 1>(n_tokens - t, n_rows, t, tile);
}

template <int RN, class Tile>
inline void SweepTokensTail(int64_t rem, int64_t t, const Tile& tile) {
  if constexpr (RN > 0) {
    if (rem == RN) {
      tile.template Run<RN>(t);
    } else {
      SweepTokensTail<RN - 1>(rem, t, tile);
    }
  }
}
// tile.template Run<RN>(t) for tokens [t, t + RN): tiles of kTokens, then
// one smaller (for kernels whose rows are fixed, e.g. a 16-row panel).
template <int kTokens, class Tile>
void SweepTokens(int64_t n_tokens, const Tile& tile) {
  int64_t t = 0;
  for (; t + kTokens <= n_tokens; t += kTokens) tile.template Run<kTokens>(t);
  SweepTokensTail<kTokens - 1>(n_tokens - t, t, tile);
}

}  // namespace
}  // namespace mx::kernels::internal
