// The amx path: the AVX-512 path with BF16 weights multiplied on the tile
// unit (AMX-BF16). Activations are rounded to bf16 (round to nearest even)
// and packed once per call (PackBf16Amx); BGemmAmx runs TDPBF16PS on the
// stored weight rows for every token count, decode included, so each output
// element is the same sequence of tile products whatever the batch:
//   C = 0; for each 32-column chunk c: C += TDPBF16PS(row's chunk c, token's chunk c)
// (per element, the unit adds the chunk's 16 pair products in its fixed
// order; it treats bf16 denormals as zero and flushes denormal results).
//
// Tiles: A = 16 weight rows x 32 columns as stored (64 bytes per row, the
// row stride of the matrix); B = 16 column pairs x up to 16 tokens, the
// packed activations; C = 16 rows x up to 16 tokens of f32, transposed into
// y (token-major) when stored. Up to 2 x 2 C tiles share each chunk's loads.
#include <cstring>

#include "kernels/isa.h"
#include "kernels/simd_avx512.h"

namespace mx::kernels::internal {
namespace {

// Weight rows per A tile; tokens per B and C tile (isa.h's token groups).
constexpr int kTile = static_cast<int>(kBf16GroupTokens);
constexpr int kChunk = static_cast<int>(kBf16ChunkValues);  // one A tile row: 64 bytes
constexpr int kChunkBytes = 64;                             // bytes of one row's chunk
// uint16 per packed (token group, chunk): 16 pairs x 16 tokens, one Bf16Chunk.
constexpr int kPackedChunk = static_cast<int>(sizeof(Bf16Chunk) / sizeof(uint16_t));
static_assert(kTile == 16 && kPackedChunk == kTile * kChunk, "one B tile per Bf16Chunk");

// The tile configuration (palette 1) as LDTILECFG reads it.
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// GCC 12's AMX intrinsics tell the compiler nothing of the memory they touch
// (ldtilecfg's operand covers 8 of the configuration's 64 bytes; tileloadd
// and tilestored have no memory operand at all), so stores before a tile
// load, or loads after a tile store, could be moved or dropped. These say so.
inline void LoadTileConfig(const TileConfig* c) { asm volatile("ldtilecfg %0" ::"m"(*c)); }
template <int kTileReg>
inline void TileLoad(const void* base, size_t stride) {
  asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(kTileReg) : "memory");
}
template <int kTileReg>
inline void TileStore(void* base, size_t stride) {
  asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "i"(kTileReg) : "memory");
}

// Tiles 0-3: C for (row block i, token group j) = tile 2 i + j; 4, 5: A of
// row blocks 0, 1; 6, 7: B of token groups 0, 1. n_tokens: tokens per B / C
// tile (16, or fewer when the whole call has fewer). Loaded once per thread
// and kept while n_tokens stays the same (nothing else here uses tiles).
void Configure(int n_tokens) {
  thread_local int configured = 0;
  if (configured == n_tokens) return;
  TileConfig c;
  std::memset(&c, 0, sizeof c);
  c.palette_id = 1;
  for (int t = 0; t < 8; ++t) c.rows[t] = kTile;
  for (int t = 0; t < 8; ++t) c.colsb[t] = static_cast<uint16_t>(4 * n_tokens);
  c.colsb[4] = c.colsb[5] = kChunkBytes;  // A: 32 bf16 per row
  LoadTileConfig(&c);
  configured = n_tokens;
}

// Lanes [0, n) of 16, for any n (none when n <= 0, all when n >= 16).
inline __mmask16 FirstLanes16(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// Where one 16-row block's A tiles come from: chunk c of row m at
// base + m * stride + c * 64 (64-byte aligned: a tile row that straddles two
// cache lines costs two loads, halving the load rate).
struct RowSource {
  const uint8_t* base;
  size_t stride;
};

// A C tile in memory (16 weight rows x 16 token columns), waiting to be
// transposed into y: token n's values go to y + n * ldy, rows [0, n_rows).
struct PendingC {
  alignas(64) float buf[kTile * kTile];
  float* y;
  int64_t ldy, n_rows, n_tokens;
};
inline void WritePending(const PendingC& p) {
  const __mmask16 m = FirstLanes16(p.n_rows);
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(p.buf + 16 * i);
  avx512::Transpose16x16(r);
  for (int64_t n = 0; n < p.n_tokens; ++n) _mm512_mask_storeu_ps(p.y + n * p.ldy, m, r[n]);
}

// Writes C tile kTileReg of a call with fewer than 16 tokens (`width`, the
// configured B / C width) into y at once.
template <int kTileReg>
inline void StoreC(int width, int64_t n_rows, int64_t n_tokens, float* y, int64_t ldy) {
  if (width == 1 && n_rows == kTile) {
    TileStore<kTileReg>(y, sizeof(float));  // a column: the 16 rows' values, in order
    return;
  }
  PendingC c;
  if (width == 1) {
    // A 4-byte row stride: the 16 rows' values land in buf[0..16).
    TileStore<kTileReg>(c.buf, sizeof(float));
    _mm512_mask_storeu_ps(y, FirstLanes16(n_rows), _mm512_load_ps(c.buf));
    return;
  }
  std::memset(c.buf, 0, sizeof c.buf);  // the columns past `width` are not stored
  TileStore<kTileReg>(c.buf, kTile * sizeof(float));
  c.y = y;
  c.ldy = ldy;
  c.n_rows = n_rows;
  c.n_tokens = n_tokens;
  WritePending(c);
}

// Full-width C tiles waiting to be written: the next block does that between
// its tile products, while the unit works, instead of the unit idling
// through it.
struct Pending {
  PendingC c[4];
  int n = 0;
};
inline void FlushPending(Pending& p, int from) {
  for (int i = from; i < p.n; ++i) WritePending(p.c[i]);
  p.n = 0;
}
// C tile kTileReg (full width) into the next pending slot.
template <int kTileReg>
inline void Defer(Pending& p, int64_t n_rows, int64_t n_tokens, float* y, int64_t ldy) {
  PendingC& c = p.c[p.n++];
  TileStore<kTileReg>(c.buf, kTile * sizeof(float));
  c.y = y;
  c.ldy = ldy;
  c.n_rows = n_rows;
  c.n_tokens = n_tokens;
}

// C tiles for up to two row blocks (RB) x two token groups (TG): zero, then
// one tile product per chunk each, then stored. rows[i]: valid rows of block
// i; tokens[j]: valid tokens of group j; b: the first group's packed chunks.
// Full-width tiles (width 16) are written through `pending`: the previous
// block's during this one's first chunks, this one's by the next block (or
// the caller's FlushPending).
template <int RB, int TG>
void Block(const RowSource* src, const int64_t* rows, const uint16_t* b, size_t group_stride,
           int width, const int64_t* tokens, int64_t n_chunks, float* y, int64_t ldy,
           Pending& pending) {
  _tile_zero(0);
  if constexpr (TG > 1) _tile_zero(1);
  if constexpr (RB > 1) {
    _tile_zero(2);
    if constexpr (TG > 1) _tile_zero(3);
  }
  for (int64_t c = 0; c < n_chunks; ++c) {
    TileLoad<4>(src[0].base + c * kChunkBytes, src[0].stride);
    if constexpr (RB > 1) TileLoad<5>(src[1].base + c * kChunkBytes, src[1].stride);
    TileLoad<6>(b + c * kPackedChunk, kChunkBytes);
    if constexpr (TG > 1) TileLoad<7>(b + group_stride + c * kPackedChunk, kChunkBytes);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (TG > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (RB > 1) {
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (TG > 1) _tile_dpbf16ps(3, 5, 7);
    }
    if (c < pending.n) WritePending(pending.c[c]);
  }
  FlushPending(pending, static_cast<int>(n_chunks < pending.n ? n_chunks : pending.n));
  if (width == kTile) {
    Defer<0>(pending, rows[0], tokens[0], y, ldy);
    if constexpr (TG > 1) Defer<1>(pending, rows[0], tokens[1], y + kTile * ldy, ldy);
    if constexpr (RB > 1) {
      Defer<2>(pending, rows[1], tokens[0], y + kTile, ldy);
      if constexpr (TG > 1) Defer<3>(pending, rows[1], tokens[1], y + kTile * ldy + kTile, ldy);
    }
    return;
  }
  StoreC<0>(width, rows[0], tokens[0], y, ldy);
  if constexpr (TG > 1) StoreC<1>(width, rows[0], tokens[1], y + kTile * ldy, ldy);
  if constexpr (RB > 1) {
    StoreC<2>(width, rows[1], tokens[0], y + kTile, ldy);
    if constexpr (TG > 1) StoreC<3>(width, rows[1], tokens[1], y + kTile * ldy + kTile, ldy);
  }
}

// A per-thread byte buffer, 64-byte aligned, grown on demand, kept until the
// thread ends.
struct ScratchBytes {
  uint8_t* storage = nullptr;
  size_t capacity = 0;
  ~ScratchBytes() { delete[] storage; }
};
uint8_t* Scratch(size_t bytes) {
  thread_local ScratchBytes s;
  if (s.capacity < bytes) {
    delete[] s.storage;
    s.storage = new uint8_t[bytes + 64];
    s.capacity = bytes;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(s.storage);
  p = (p + 63) & ~static_cast<uintptr_t>(63);
  return reinterpret_cast<uint8_t*>(p);
}

// Copies n (<= 16) rows of n_bytes each into 16 rows of `out_stride` bytes
// (a multiple of 64, >= n_bytes), zero-filled past n_bytes and below row n.
void PadRows(const uint8_t* w, size_t row_bytes, int64_t n, size_t n_bytes, uint8_t* out,
             size_t out_stride) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t r = 0; r < kTile; ++r) {
    const uint8_t* src = w + static_cast<size_t>(r) * row_bytes;
    uint8_t* dst = out + static_cast<size_t>(r) * out_stride;
    size_t k = 0;
    if (r < n) {
      for (; k + 64 <= n_bytes; k += 64) _mm512_store_si512(dst + k, _mm512_loadu_si512(src + k));
      if (k < n_bytes) {
        const __mmask64 m = _cvtu64_mask64(~uint64_t{0} >> (64 - (n_bytes - k)));
        _mm512_store_si512(dst + k, _mm512_maskz_loadu_epi8(m, src + k));
        k += 64;
      }
    }
    for (; k < out_stride; k += 64) _mm512_store_si512(dst + k, zero);
  }
}

}  // namespace

void PackBf16Amx(const float* x, int64_t ldx, int64_t n_tokens, int64_t n_cols, uint16_t* out) {
  const int64_t n_chunks = (n_cols + kChunk - 1) / kChunk;
  for (int64_t g = 0; g * kTile < n_tokens; ++g) {
    const int64_t tokens = n_tokens - g * kTile < kTile ? n_tokens - g * kTile : kTile;
    for (int64_t c = 0; c < n_chunks; ++c) {
      // Token j's 32 columns as 16 pairs (one 32-bit lane each); then lane kk
      // of every token becomes row kk of the B tile.
      __m512 r[16];
      const int64_t k = c * kChunk;
      const __mmask16 lo = FirstLanes16(n_cols - k);
      const __mmask16 hi = FirstLanes16(n_cols - k - 16);
      for (int64_t j = 0; j < kTile; ++j) {
        if (j < tokens) {
          const float* xt = x + (g * kTile + j) * ldx + k;
          const __m512 a = _mm512_maskz_loadu_ps(lo, xt);
          const __m512 b = _mm512_maskz_loadu_ps(hi, xt + 16);
          const __m512bh pairs = _mm512_cvtne2ps_pbh(b, a);
          std::memcpy(&r[j], &pairs, sizeof pairs);
        } else {
          r[j] = _mm512_setzero_ps();
        }
      }
      avx512::Transpose16x16(r);
      uint16_t* dst = out + (g * n_chunks + c) * kPackedChunk;
      for (int i = 0; i < 16; ++i) _mm512_store_ps(reinterpret_cast<float*>(dst + 32 * i), r[i]);
    }
  }
}

void BGemmAmx(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
              const uint16_t* xp, int64_t n_tokens, float* y, int64_t ldy) {
  if (n_rows <= 0 || n_tokens <= 0) return;
  const int64_t n_chunks = (n_cols + kChunk - 1) / kChunk;
  const size_t group_stride = static_cast<size_t>(n_chunks) * kPackedChunk;
  const size_t padded_stride = static_cast<size_t>(n_chunks) * kChunkBytes;
  const int width = n_tokens >= kTile ? kTile : static_cast<int>(n_tokens);
  Configure(width);
  // Rows starting on 64-byte boundaries (with whole chunks) are read where
  // they are; others (GGUF aligns tensors to 32 bytes), a partial last row
  // block and a partial last chunk go through zero-padded aligned copies,
  // one per row block, alternating between two sets (writing over memory
  // the tile unit may still be reading stalls until it is done).
  const bool in_place = reinterpret_cast<uintptr_t>(w) % kChunkBytes == 0 && n_cols % kChunk == 0;
  uint8_t* scratch = Scratch(4 * kTile * padded_stride);
  const int64_t n_groups = (n_tokens + kTile - 1) / kTile;
  Pending pending;
  for (int64_t r0 = 0; r0 < n_rows; r0 += 2 * kTile) {
    RowSource src[2];
    int64_t rows[2] = {0, 0};
    const int rb = n_rows - r0 > kTile ? 2 : 1;
    for (int i = 0; i < rb; ++i) {
      const int64_t r = r0 + i * kTile;
      const uint8_t* wr = w + static_cast<size_t>(r) * row_bytes;
      rows[i] = n_rows - r < kTile ? n_rows - r : kTile;
      if (in_place && rows[i] == kTile) {
        src[i] = {wr, row_bytes};
      } else {
        const size_t set = static_cast<size_t>(r0 / (2 * kTile)) % 2;
        uint8_t* copy = scratch + (2 * set + static_cast<size_t>(i)) * kTile * padded_stride;
        PadRows(wr, row_bytes, rows[i], static_cast<size_t>(n_cols) * 2, copy, padded_stride);
        src[i] = {copy, padded_stride};
      }
    }
    for (int64_t g = 0; g < n_groups; g += 2) {
      const int tg = n_groups - g > 1 ? 2 : 1;
      int64_t tokens[2] = {0, 0};
      for (int j = 0; j < tg; ++j) {
        const int64_t left = n_tokens - (g + j) * kTile;
        tokens[j] = left < kTile ? left : kTile;
      }
      const uint16_t* b = xp + static_cast<size_t>(g) * group_stride;
      float* yb = y + g * kTile * ldy + r0;
      if (rb == 2 && tg == 2) {
        Block<2, 2>(src, rows, b, group_stride, width, tokens, n_chunks, yb, ldy, pending);
      } else if (rb == 2) {
        Block<2, 1>(src, rows, b, group_stride, width, tokens, n_chunks, yb, ldy, pending);
      } else if (tg == 2) {
        Block<1, 2>(src, rows, b, group_stride, width, tokens, n_chunks, yb, ldy, pending);
      } else {
        Block<1, 1>(src, rows, b, group_stride, width, tokens, n_chunks, yb, ldy, pending);
      }
    }
  }
  FlushPending(pending, 0);
}

const IsaOps& AmxOps() {
  static const IsaOps ops = [] {
    IsaOps o = Avx512Ops();
    o.isa = Isa::kAmx;
    o.pack_bf16 = PackBf16Amx;
    o.bgemm = BGemmAmx;
    return o;
  }();
  return ops;
}

}  // namespace mx::kernels::internal
