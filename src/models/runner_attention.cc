// The attention mixers: causal softmax attention with GQA over the
// sequence's KV rows (kAttention), optionally with q/k/v biases, per-head
// q/k RMS norms and RoPE, and the gated variant (kGatedAttention, qwen35)
// whose query projection also yields a per-head gate: out = Wo (o * sigmoid(gate)).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/runner.h"

namespace mx::models {
namespace {

inline float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// Llama 4's attention temperature for the query at RoPE position `pos`, in
// llama.cpp's types: a float quotient floored, then double arithmetic.
float AttentionTemperature(const ModelConfig& c, int64_t pos) {
  const float q = static_cast<float>(pos) / static_cast<float>(c.attn_temperature_floor);
  return static_cast<float>(std::log(std::floor(q) + 1.0) * c.attn_temperature_scale + 1.0);
}

}  // namespace

void Runner::AttentionMixer(size_t layer, size_t attn_index, int64_t n) {
  const ModelConfig& c = model_.config();
  const LayerConfig& lc = c.layers[layer];
  const LayerWeights& w = model_.layer(static_cast<int64_t>(layer));
  const int64_t e = c.n_embd, hd = c.head_dim_k;
  const int64_t q_dim = lc.n_head * hd, kv_dim = lc.n_kv_head * hd;
  const bool gated = lc.mixer == Mixer::kGatedAttention;

  q_.resize(static_cast<size_t>(n * q_dim));
  k_.resize(static_cast<size_t>(n * kv_dim));
  v_.resize(static_cast<size_t>(n * kv_dim));
  if (gated) {
    // Wq gives per head [q | gate]: project into ff1_, then split.
    ff1_.resize(static_cast<size_t>(n * 2 * q_dim));
    gate_.resize(static_cast<size_t>(n * q_dim));
    const kernels::MatMulJob qkv[] = {{w.wq, h_.data(), e, n, ff1_.data(), 2 * q_dim},
                                      {w.wk, h_.data(), e, n, k_.data(), kv_dim},
                                      {w.wv, h_.data(), e, n, v_.data(), kv_dim}};
    kernels::MatMuls(qkv, &pool_);
    for (int64_t i = 0; i < n; ++i) {
      for (int h = 0; h < lc.n_head; ++h) {
        const float* src = &ff1_[static_cast<size_t>(i * 2 * q_dim + 2 * h * hd)];
        std::memcpy(&q_[static_cast<size_t>(i * q_dim + h * hd)], src, hd * sizeof(float));
        std::memcpy(&gate_[static_cast<size_t>(i * q_dim + h * hd)], src + hd, hd * sizeof(float));
      }
    }
  } else {
    const kernels::MatMulJob qkv[] = {{w.wq, h_.data(), e, n, q_.data(), q_dim},
                                      {w.wk, h_.data(), e, n, k_.data(), kv_dim},
                                      {w.wv, h_.data(), e, n, v_.data(), kv_dim}};
    kernels::MatMuls(qkv, &pool_);
  }

  // The context's RoPE (frequency tables, YaRN, LongRoPE's set), the one a
  // context shift re-rotates with; none on NoPE layers.
  const bool rope_on = layout_->rope_on(attn_index);
  const kernels::RopeParams rope = layout_->rope_params(attn_index);
  for (int64_t i = 0; i < n; ++i) {
    float* q = &q_[i * q_dim];
    float* k = &k_[i * kv_dim];
    float* v = &v_[i * kv_dim];
    if (!w.bq.empty()) kernels::Add(w.bq.data(), q_dim, q);
    if (!w.bk.empty()) kernels::Add(w.bk.data(), kv_dim, k);
    if (!w.bv.empty()) kernels::Add(w.bv.data(), kv_dim, v);
    if (c.qk_norm) {
      for (int h = 0; h < lc.n_head; ++h)
        kernels::RmsNorm(q + h * hd, w.q_norm.data(), hd, c.rms_eps, q + h * hd);
      for (int h = 0; h < lc.n_kv_head; ++h)
        kernels::RmsNorm(k + h * hd, w.k_norm.data(), hd, c.rms_eps, k + h * hd);
    }
    const Planned& plan = plan_[static_cast<size_t>(i)];
    const int64_t pos = plan.pos;
    if (rope_on && !c.rope_sections.empty()) {
      kernels::RopeMulti(q, lc.n_head, static_cast<int>(hd), rope, c.rope_sections.data(),
                         plan.rope);
      kernels::RopeMulti(k, lc.n_kv_head, static_cast<int>(hd), rope, c.rope_sections.data(),
                         plan.rope);
    } else if (rope_on) {
      kernels::Rope(q, lc.n_head, static_cast<int>(hd), rope, plan.rope.t);
      kernels::Rope(k, lc.n_kv_head, static_cast<int>(hd), rope, plan.rope.t);
    }
    if (c.attn_temperature_scale != 0.0f) {
      const float t = AttentionTemperature(c, plan.rope.t);
      for (int64_t j = 0; j < q_dim; ++j) q[j] *= t;
    }
    SequenceState* seq = plan_[static_cast<size_t>(i)].seq;
    kernels::StoreKvRow(layout_->k_type, k, kv_dim, seq->k_row(attn_index, pos));
    kernels::StoreKvRow(layout_->v_type, v, kv_dim, seq->v_row(attn_index, pos));
  }

  // Attention: one task per (query tile, kv head) — the tile's queries and
  // the heads sharing that kv head read its K/V rows together — or, when
  // that gives fewer tasks than threads (generation of one sequence with one
  // kv head), one task per (query tile, head). Each query reads only its own sequence's
  // rows [0, pos] and gets the same bits either way (kernels.h AttentionRows).
  att_.resize(static_cast<size_t>(n * q_dim));
  const float scale =
      c.attention_scale > 0.0f ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t k_head = kernels::KvHeadBytes(layout_->k_type, hd);
  const size_t v_head = kernels::KvHeadBytes(layout_->v_type, hd);
  const int group = lc.n_head / lc.n_kv_head;
  const auto n_tiles = static_cast<int64_t>(query_tiles_.size());
  const int per_tile =
      n_tiles * lc.n_kv_head >= static_cast<int64_t>(pool_.n_threads()) ? lc.n_kv_head : lc.n_head;
  const int heads_per_task = lc.n_head / per_tile;
  const int64_t window = layout_->window(attn_index);
  const bool masked = window > 0 && std::any_of(plan_.begin(), plan_.end(),
                                                [&](const Planned& p) { return p.pos >= window; });
  if (masked) {
    WindowAttention(attn_index, lc.n_head, lc.n_kv_head, hd, scale, window);
  } else if (SplitAttention(attn_index, lc.n_head, lc.n_kv_head, hd, scale)) {
    // done: long-context generation in two phases
  } else {
    pool_.ParallelFor(n_tiles * per_tile, [&](int64_t task, int thread) {
      const QueryTile& tile = query_tiles_[static_cast<size_t>(task / per_tile)];
      const int h0 = static_cast<int>(task % per_tile) * heads_per_task;
      const SequenceState* seq = plan_[static_cast<size_t>(tile.first)].seq;
      const auto kv_head = static_cast<size_t>(h0 / group);
      kernels::KvView kv;
      kv.k_type = layout_->k_type;
      kv.v_type = layout_->v_type;
      kv.k = seq->k_data(attn_index) + kv_head * k_head;
      kv.v = seq->v_data(attn_index) + kv_head * v_head;
      kv.k_row_bytes = layout_->k_row_bytes(attn_index);
      kv.v_row_bytes = layout_->v_row_bytes(attn_index);
      kv.n_kv_head = 1;
      kv.head_dim = static_cast<int>(hd);
      const int64_t first = tile.first * q_dim + h0 * hd;
      kernels::AttentionRows(&q_[static_cast<size_t>(first)], q_dim, tile.n_q, heads_per_task, kv,
                             &n_pos_[static_cast<size_t>(tile.first)], scale,
                             &att_[static_cast<size_t>(first)], q_dim,
                             att_scratch_[static_cast<size_t>(thread)].data());
    });
  }

  if (!w.attn_sinks.empty()) ApplySinks(attn_index, lc.n_head, lc.n_kv_head, hd, scale, window,
                                        w.attn_sinks);
  if (gated) {
    for (size_t j = 0; j < att_.size(); ++j) att_[j] *= Sigmoid(gate_[j]);
  }
  kernels::MatMul(w.wo, att_.data(), q_dim, n, out_.data(), e, &pool_);
  if (!w.bo.empty()) {
    for (int64_t i = 0; i < n; ++i) kernels::Add(w.bo.data(), e, &out_[i * e]);
  }
}

// A sink S_h joins head h's softmax as one more logit without a value:
//   a_j = exp(z_j) / (sum_j exp(z_j) + exp(S_h)),
// which is the attention without it times sigmoid(lse - S_h), lse = the log
// of its softmax's sum. Each (query, kv head) task recomputes the scaled
// scores of the query's positions (its window on windowed layers) as one
// product of the cached keys with the group's query heads, then rescales
// those heads' outputs; a query's result depends on its own rows only.
void Runner::ApplySinks(size_t attn_index, int n_head, int n_kv_head, int64_t hd, float scale,
                        int64_t window, const std::vector<float>& sinks) {
  const int64_t q_dim = n_head * hd;
  const auto n = static_cast<int64_t>(plan_.size());
  const int group = n_head / n_kv_head;
  const size_t k_head = kernels::KvHeadBytes(layout_->k_type, hd);
  const size_t k_row = layout_->k_row_bytes(attn_index);
  pool_.ParallelFor(n * n_kv_head, [&](int64_t task, int thread) {
    const int64_t i = task / n_kv_head;
    const auto kv_head = static_cast<int>(task % n_kv_head);
    const Planned& p = plan_[static_cast<size_t>(i)];
    const int64_t first_row = window > 0 ? std::max<int64_t>(0, p.pos + 1 - window) : 0;
    const int64_t n_pos = p.pos + 1 - first_row;
    Matrix keys;
    keys.type = layout_->k_type;
    keys.data = p.seq->k_data(attn_index) + static_cast<size_t>(first_row) * k_row +
                static_cast<size_t>(kv_head) * k_head;
    keys.n_cols = hd;
    keys.n_rows = n_pos;
    keys.row_bytes = k_row;
    float* scores = att_scratch_[static_cast<size_t>(thread)].data();  // [group][n_pos]
    const int64_t at = i * q_dim + static_cast<int64_t>(kv_head) * group * hd;
    kernels::MatMul(keys, &q_[static_cast<size_t>(at)], hd, group, scores, n_pos, nullptr);
    for (int g = 0; g < group; ++g) {
      float* s = scores + static_cast<int64_t>(g) * n_pos;
      for (int64_t j = 0; j < n_pos; ++j) s[j] *= scale;
      const double lse = kernels::LogSumExp(s, n_pos);
      const float sink = sinks[static_cast<size_t>(kv_head * group + g)];
      const auto keep = static_cast<float>(1.0 / (1.0 + std::exp(sink - lse)));
      float* o = &att_[static_cast<size_t>(at + static_cast<int64_t>(g) * hd)];
      for (int64_t d = 0; d < hd; ++d) o[d] *= keep;
    }
  });
}

// A query at row p of a windowed layer reads rows [p - window + 1, p]: its
// K/V view starts at the window's first row. One query per task (each
// query's window starts elsewhere), split by kv head, or by head when that
// gives fewer tasks than threads; AttentionRows gives a query the same bits
// whatever it is batched with, so chunks and batches agree with one batch.
void Runner::WindowAttention(size_t attn_index, int n_head, int n_kv_head, int64_t hd, float scale,
                             int64_t window) {
  const int64_t q_dim = n_head * hd;
  const auto n = static_cast<int64_t>(plan_.size());
  const size_t k_head = kernels::KvHeadBytes(layout_->k_type, hd);
  const size_t v_head = kernels::KvHeadBytes(layout_->v_type, hd);
  const size_t k_row = layout_->k_row_bytes(attn_index), v_row = layout_->v_row_bytes(attn_index);
  const int group = n_head / n_kv_head;
  const int per_query =
      n * n_kv_head >= static_cast<int64_t>(pool_.n_threads()) ? n_kv_head : n_head;
  const int heads_per_task = n_head / per_query;
  pool_.ParallelFor(n * per_query, [&](int64_t task, int thread) {
    const int64_t i = task / per_query;
    const int h0 = static_cast<int>(task % per_query) * heads_per_task;
    const Planned& p = plan_[static_cast<size_t>(i)];
    const int64_t first_row = std::max<int64_t>(0, p.pos + 1 - window);
    const int64_t n_pos = p.pos + 1 - first_row;  // [n_q = 1]
    const auto kv_head = static_cast<size_t>(h0 / group);
    kernels::KvView kv;
    kv.k_type = layout_->k_type;
    kv.v_type = layout_->v_type;
    kv.k = p.seq->k_data(attn_index) + static_cast<size_t>(first_row) * k_row + kv_head * k_head;
    kv.v = p.seq->v_data(attn_index) + static_cast<size_t>(first_row) * v_row + kv_head * v_head;
    kv.k_row_bytes = k_row;
    kv.v_row_bytes = v_row;
    kv.n_kv_head = 1;
    kv.head_dim = static_cast<int>(hd);
    const int64_t at = i * q_dim + h0 * hd;
    kernels::AttentionRows(&q_[static_cast<size_t>(at)], q_dim, 1, heads_per_task, kv, &n_pos,
                           scale, &att_[static_cast<size_t>(at)], q_dim,
                           att_scratch_[static_cast<size_t>(thread)].data());
  });
}

// Generation over long contexts (kernels.h AttentionScores): F16 or F32 keys,
// every tile few rows per kv head and some tile past kSplitMinPos positions. Phase one
// spreads position ranges of every tile over the threads (each reads whole K
// rows), phase two runs of adjacent kv heads per tile. The same bits as AttentionRows.
bool Runner::SplitAttention(size_t attn_index, int n_head, int n_kv_head, int64_t hd, float scale) {
  constexpr int64_t kSplitMinPos = 1024;  // below it one pass per kv head is as fast
  constexpr int64_t kChunk = 512;         // positions per phase-one task (a multiple of 16)
  const int64_t q_dim = n_head * hd;
  // Quantized keys convert so slowly that the scores are compute-bound in
  // either layout (one pass per kv head measured 5 % faster with Q8_0 K).
  if (layout_->k_type != DType::kF16 && layout_->k_type != DType::kF32) return false;
  kernels::KvView kv;
  kv.k_type = layout_->k_type;
  kv.v_type = layout_->v_type;
  kv.k_row_bytes = layout_->k_row_bytes(attn_index);
  kv.v_row_bytes = layout_->v_row_bytes(attn_index);
  kv.n_kv_head = n_kv_head;
  kv.head_dim = static_cast<int>(hd);
  int64_t max_pos = 0, max_q = 0;
  for (const QueryTile& t : query_tiles_) {
    if (!kernels::AttentionSplitAvailable(t.n_q, n_head, kv)) return false;
    for (int64_t i = 0; i < t.n_q; ++i)
      max_pos = std::max(max_pos, n_pos_[static_cast<size_t>(t.first + i)]);
    max_q = std::max(max_q, t.n_q);
  }
  if (max_pos < kSplitMinPos) return false;
  const int64_t lds = (max_pos + 15) / 16 * 16;
  const int64_t tile_floats = max_q * n_head * lds;
  const auto n_tiles = static_cast<int64_t>(query_tiles_.size());
  scores_.resize(static_cast<size_t>(n_tiles * tile_floats));
  auto view_of = [&](const QueryTile& t) {
    const SequenceState* seq = plan_[static_cast<size_t>(t.first)].seq;
    kernels::KvView v = kv;
    v.k = seq->k_data(attn_index);
    v.v = seq->v_data(attn_index);
    return v;
  };
  const int64_t n_chunks = (max_pos + kChunk - 1) / kChunk;
  pool_.ParallelFor(n_tiles * n_chunks, [&](int64_t task, int) {
    const QueryTile& t = query_tiles_[static_cast<size_t>(task / n_chunks)];
    const int64_t p0 = (task % n_chunks) * kChunk;
    const int64_t* np = &n_pos_[static_cast<size_t>(t.first)];
    int64_t n_max = 0;
    for (int64_t i = 0; i < t.n_q; ++i) n_max = std::max(n_max, np[i]);
    if (p0 >= n_max) return;
    kernels::AttentionScores(&q_[static_cast<size_t>(t.first * q_dim)], q_dim, t.n_q, n_head,
                             view_of(t), np, p0, p0 + kChunk, scale,
                             &scores_[static_cast<size_t>((task / n_chunks) * tile_floats)], lds);
  });
  // Phase two: each thread a run of adjacent kv heads, read a span of
  // positions at a time across the run.
  const int parts = std::min(n_kv_head, pool_.n_threads());
  pool_.ParallelFor(n_tiles * parts, [&](int64_t task, int) {
    const int64_t ti = task / parts;
    const QueryTile& t = query_tiles_[static_cast<size_t>(ti)];
    const auto part = static_cast<int>(task % parts);
    kernels::AttentionFromScores(t.n_q, n_head, view_of(t), &n_pos_[static_cast<size_t>(t.first)],
                                 n_kv_head * part / parts, n_kv_head * (part + 1) / parts,
                                 &scores_[static_cast<size_t>(ti * tile_floats)], lds,
                                 &att_[static_cast<size_t>(t.first * q_dim)], q_dim);
  });
  return true;
}

}  // namespace mx::models
