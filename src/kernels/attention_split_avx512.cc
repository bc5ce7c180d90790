// AVX-512 long-context generation in two phases (kernels.h AttentionScores,
// AttentionFromScores): the scores over position ranges of every kv head, then
// softmax and the weighted sums per run of kv heads; the same bits as
// AttentionRows (attention_avx512.h).
#include "kernels/attention_avx512.h"

namespace mx::kernels::internal {
namespace {

// WeightedSumPass for the sets of several kv heads (V of set k at v[k]) at
// once: the shared positions go kHeadsSpan at a time, every set in turn, so
// V is read in runs of the sets' adjacent head slices instead of one head's
// slice strided by the others. The accumulators wait in `acc` (n_sets x NR x
// W vectors) between spans: the same chains, the same bits.
template <class L, int NR, int W>
void WeightedSumPassHeads(const RowSet* sets, int n_sets, const uint8_t* const* v, size_t rb,
                          int hd, int d0, const float (*inv)[kRowTile], int64_t n_min,
                          __m512* acc) {
  constexpr int64_t kHeadsSpan = 64;
  __mmask16 m[W];
  PassMasks<W>(hd, d0, m);
  for (int64_t i = 0; i < static_cast<int64_t>(n_sets) * NR * W; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t pb = 0; pb < n_min; pb += kHeadsSpan) {
    const int64_t pe = n_min - pb < kHeadsSpan ? n_min : pb + kHeadsSpan;
    for (int k = 0; k < n_sets; ++k) {
      __m512 a[NR][W];
      __m512* mem = acc + static_cast<int64_t>(k) * NR * W;
      for (int i = 0; i < NR; ++i) {
        for (int j = 0; j < W; ++j) a[i][j] = mem[i * W + j];
      }
      WeightedSumSpan<L, NR, W>(sets[k], v[k], rb, d0, m, pb, pe, n_min, a);
      for (int i = 0; i < NR; ++i) {
        for (int j = 0; j < W; ++j) mem[i * W + j] = a[i][j];
      }
    }
  }
  for (int k = 0; k < n_sets; ++k) {
    __m512 a[NR][W];
    const __m512* mem = acc + static_cast<int64_t>(k) * NR * W;
    for (int i = 0; i < NR; ++i) {
      for (int j = 0; j < W; ++j) a[i][j] = mem[i * W + j];
    }
    FinishPass<L, NR, W>(sets[k], v[k], rb, d0, m, inv[k], n_min, a);
  }
}

// The few-row set of kv head kvh (AttentionRows's rows: query i, head
// kvh * group + g, in that order), score rows at s + (i * n_head + h) * lds
// + p_off.
RowSet FewSet(const float* q, int64_t ldq, int64_t n_q, int n_head, int group, int kvh, int hd,
              const int64_t* n_pos, float* s, int64_t lds, int64_t p_off, float* out, int64_t ldo) {
  RowSet rs;
  for (int64_t i = 0; i < n_q; ++i) {
    for (int g = 0; g < group; ++g) {
      const int64_t h = static_cast<int64_t>(kvh) * group + g;
      rs.q[rs.n] = q != nullptr ? q + i * ldq + h * hd : nullptr;
      rs.out[rs.n] = out != nullptr ? out + i * ldo + h * hd : nullptr;
      rs.s[rs.n] = s + (i * n_head + h) * lds + p_off;
      rs.n_pos[rs.n] = n_pos[i];
      ++rs.n;
    }
  }
  return rs;
}

template <int NR>
void ScoresOf(const RowSet& rs, DType type, const uint8_t* k, size_t rb, int hd, float scale,
              int64_t n) {
  WithLoader(type, [&](auto l) { ScoresFew<decltype(l), NR>(rs, k, rb, hd, scale, n); });
}
template <int NR>
void FromScoresOf(RowSet& rs, const HeadKv& kv, int hd) {
  float inv[NR];  // 0 for a row without positions: its output is zeros
  for (int i = 0; i < NR; ++i)
    inv[i] = rs.n_pos[i] > 0 ? 1.0f / ExpAndSum(rs.s[i], rs.n_pos[i]) : 0.0f;
  WithLoader(kv.v_type,
             [&](auto l) { WeightedSumFew<decltype(l), NR>(rs, kv.v, kv.v_rb, hd, inv); });
}

// FromScoresOf for the sets of adjacent kv heads (WeightedSumPassHeads).
constexpr int kMaxHeadsSets = 16;
template <int NR>
void FromScoresOfHeads(RowSet* sets, int n_sets, const uint8_t* const* v, DType v_type, size_t rb,
                       int hd) {
  float inv[kMaxHeadsSets][kRowTile];
  int64_t n_min = INT64_MAX;
  for (int k = 0; k < n_sets; ++k) {
    for (int i = 0; i < NR; ++i) {
      const RowSet& rs = sets[k];
      inv[k][i] = rs.n_pos[i] > 0 ? 1.0f / ExpAndSum(rs.s[i], rs.n_pos[i]) : 0.0f;
      n_min = rs.n_pos[i] < n_min ? rs.n_pos[i] : n_min;
    }
  }
  constexpr int kW = NR <= 2 ? 8 : 4;
  auto* acc = static_cast<__m512*>(
      avx512::ThreadScratch(static_cast<size_t>(n_sets) * NR * kW * sizeof(__m512)));
  WithLoader(v_type, [&](auto l) {
    using L = decltype(l);
    for (int d0 = 0; d0 < hd; d0 += 16 * kW) {
      if (hd - d0 <= 64) {
        WeightedSumPassHeads<L, NR, 4>(sets, n_sets, v, rb, hd, d0, inv, n_min, acc);
      } else {
        WeightedSumPassHeads<L, NR, kW>(sets, n_sets, v, rb, hd, d0, inv, n_min, acc);
      }
    }
  });
}

int GroupOf(int n_head, const KvView& kv) {
  const int n_kv = kv.n_kv_head > 0 ? kv.n_kv_head : 1;
  return n_head >= n_kv ? n_head / n_kv : 1;
}

}  // namespace

bool AttentionSplitFits(int64_t n_q, int n_head, const KvView& kv) {
  return n_q * GroupOf(n_head, kv) < kManyRows;
}

void AttentionScoresAvx512(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                           const int64_t* n_pos, int64_t p0, int64_t p1, float scale, float* s,
                           int64_t lds) {
  const int hd = kv.head_dim, group = GroupOf(n_head, kv);
  const int n_kv = kv.n_kv_head > 0 ? kv.n_kv_head : 1;
  const size_t k_head = RowBytes(kv.k_type, hd), rb = kv.k_row_bytes;
  int64_t n_max = 0;
  for (int64_t i = 0; i < n_q; ++i) n_max = n_pos[i] > n_max ? n_pos[i] : n_max;
  const int64_t end = p1 < n_max ? p1 : n_max;
  // Whole rows are read one 16-row block at a time, every kv head in turn;
  // the block after next is fetched a few rows per kv head.
  const int row_lines = static_cast<int>((rb + 63) / 64);
  const int fetch_rows = (16 + n_kv - 1) / n_kv;
  for (int64_t b = p0; b < end; b += 16) {
    const int64_t n = end - b < 16 ? end - b : 16;
    const uint8_t* rows = kv.k + static_cast<size_t>(b) * rb;
    for (int kvh = 0; kvh < n_kv && kvh * group < n_head; ++kvh) {
      for (int j = 32 + kvh * fetch_rows; j < 32 + (kvh + 1) * fetch_rows && j < 48; ++j) {
        if (b + j >= end) break;
        const char* r = reinterpret_cast<const char*>(rows + static_cast<size_t>(j) * rb);
        for (int l = 0; l < row_lines; ++l) _mm_prefetch(r + 64 * l, _MM_HINT_T0);
      }
      const RowSet rs = FewSet(q, ldq, n_q, n_head, group, kvh, hd, n_pos, s, lds, b, nullptr, 0);
      const uint8_t* k = rows + static_cast<size_t>(kvh) * k_head;
      switch (rs.n) {
        case 4:
          ScoresOf<4>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
        case 3:
          ScoresOf<3>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
        case 2:
          ScoresOf<2>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
        default:
          ScoresOf<1>(rs, kv.k_type, k, rb, hd, scale, n);
          break;
      }
    }
  }
}

void AttentionFromScoresAvx512(int64_t n_q, int n_head, const KvView& kv, const int64_t* n_pos,
                               int kv0, int kv1, float* s, int64_t lds, float* out, int64_t ldo) {
  const int hd = kv.head_dim, group = GroupOf(n_head, kv);
  const size_t v_head = RowBytes(kv.v_type, hd);
  int64_t n_max = 0;
  for (int64_t i = 0; i < n_q; ++i) n_max = n_pos[i] > n_max ? n_pos[i] : n_max;
  if (kv1 > kv0 + 1 && n_max > 0) {
    // Every set has the same queries, hence the same row count.
    RowSet sets[kMaxHeadsSets];
    const uint8_t* v[kMaxHeadsSets];
    int n_sets = 0;
    for (int kvh = kv0; kvh < kv1 && kvh * group < n_head; ++kvh) {
      if (n_sets == kMaxHeadsSets) {  // the rest in further calls of at most as many
        AttentionFromScoresAvx512(n_q, n_head, kv, n_pos, kvh, kv1, s, lds, out, ldo);
        break;
      }
      sets[n_sets] = FewSet(nullptr, 0, n_q, n_head, group, kvh, hd, n_pos, s, lds, 0, out, ldo);
      v[n_sets++] = kv.v + static_cast<size_t>(kvh) * v_head;
    }
    switch (sets[0].n) {
      case 4:
        FromScoresOfHeads<4>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
      case 3:
        FromScoresOfHeads<3>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
      case 2:
        FromScoresOfHeads<2>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
      default:
        FromScoresOfHeads<1>(sets, n_sets, v, kv.v_type, kv.v_row_bytes, hd);
        break;
    }
    return;
  }
  for (int kvh = kv0; kvh < kv1 && kvh * group < n_head; ++kvh) {
    RowSet rs = FewSet(nullptr, 0, n_q, n_head, group, kvh, hd, n_pos, s, lds, 0, out, ldo);
    if (n_max <= 0) {
      for (int r = 0; r < rs.n; ++r) {
        for (int d = 0; d < hd; ++d) rs.out[r][d] = 0.0f;
      }
      continue;
    }
    const HeadKv head{kv.k,           kv.v + static_cast<size_t>(kvh) * v_head,
                      kv.k_row_bytes, kv.v_row_bytes,
                      kv.k_type,      kv.v_type};
    switch (rs.n) {
      case 4:
        FromScoresOf<4>(rs, head, hd);
        break;
      case 3:
        FromScoresOf<3>(rs, head, hd);
        break;
      case 2:
        FromScoresOf<2>(rs, head, hd);
        break;
      default:
        FromScoresOf<1>(rs, head, hd);
        break;
    }
  }
}

}  // namespace mx::kernels::internal
