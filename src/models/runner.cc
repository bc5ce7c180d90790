#include "models/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace mx::models {

Result<std::unique_ptr<Runner>> Runner::Create(const Model& model, const RunnerOptions& options) {
  if (options.kv_type != DType::kF16 && options.kv_type != DType::kF32) {
    return Status::InvalidArgument("KV cache type " + DTypeName(options.kv_type) +
                                   " is not supported (F16 or F32)");
  }
  const ModelConfig& c = model.config();
  int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(c.n_ctx_train, 8192);
  if (n_ctx > (int64_t{1} << 24)) {
    return Status::InvalidArgument("context size " + std::to_string(n_ctx) + " is too large");
  }
  auto layout =
      std::make_shared<const StateLayout>(StateLayout::ForModel(c, options.kv_type, n_ctx));
  return std::unique_ptr<Runner>(new Runner(model, options, std::move(layout)));
}

Runner::Runner(const Model& model, const RunnerOptions& options,
               std::shared_ptr<const StateLayout> layout)
    : model_(model), layout_(std::move(layout)), pool_(options.n_threads) {
  att_scratch_.resize(static_cast<size_t>(pool_.n_threads()));
  // Attention tiles: as many tokens as fill kAttentionRowTile rows of the
  // widest kv-head group.
  int max_group = 1;
  for (const LayerConfig& lc : model_.config().layers) {
    if (lc.has_attention() && lc.n_kv_head > 0) max_group = std::max(max_group, lc.n_head / lc.n_kv_head);
  }
  tile_tokens_ = std::max(1, kernels::kAttentionRowTile / max_group);
}

std::unique_ptr<SequenceState> Runner::NewSequence() const {
  auto seq = std::make_unique<SequenceState>(layout_);
  seq->set_copy_pool(&pool_);
  return seq;
}

Status Runner::Prepare(std::span<const BatchEntry> batch) {
  const int64_t n_vocab = model_.config().n_vocab;
  std::unordered_map<SequenceState*, int64_t> next_pos;
  plan_.clear();
  plan_.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchEntry& e = batch[i];
    if (e.seq == nullptr) return Status::InvalidArgument("batch entry " + std::to_string(i) + " has no sequence");
    if (&e.seq->layout() != layout_.get()) {
      return Status::InvalidArgument("batch entry " + std::to_string(i) +
                                     ": sequence state belongs to another model or runner");
    }
    if (e.token < 0 || e.token >= n_vocab) {
      return Status::InvalidArgument("token id " + std::to_string(e.token) +
                                     " is out of range [0, " + std::to_string(n_vocab) + ")");
    }
    auto [it, inserted] = next_pos.try_emplace(e.seq, e.seq->n_tokens());
    plan_.push_back({e.seq, it->second});
    ++it->second;
  }
  for (const auto& [seq, end] : next_pos) {
    if (end > layout_->n_ctx) {
      return Status::InvalidArgument("the sequence would hold " + std::to_string(end) +
                                     " tokens, more than the context size " +
                                     std::to_string(layout_->n_ctx));
    }
  }
  for (const auto& [seq, end] : next_pos) MX_RETURN_IF_ERROR(seq->Reserve(end));
  return Status::Ok();
}

Status Runner::Forward(std::span<const BatchEntry> batch, std::vector<float>* logits) {
  MX_RETURN_IF_ERROR(Prepare(batch));
  const ModelConfig& c = model_.config();
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t e = c.n_embd;
  if (n == 0) {
    logits->clear();
    return Status::Ok();
  }
  x_.resize(static_cast<size_t>(n * e));
  h_.resize(x_.size());
  out_.resize(x_.size());

  // Embeddings.
  const Matrix& emb = model_.token_embd();
  for (int64_t i = 0; i < n; ++i) {
    kernels::DequantizeRow(emb.type, emb.data + static_cast<size_t>(batch[i].token) * emb.row_bytes,
                           &x_[static_cast<size_t>(i * e)], e);
  }

  // Attention query tiles: runs of consecutive entries of one sequence, as
  // many as fill kAttentionRowTile (query, head) rows of one kv head.
  query_tiles_.clear();
  n_pos_.resize(static_cast<size_t>(n));
  int64_t max_pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Planned& p = plan_[static_cast<size_t>(i)];
    n_pos_[static_cast<size_t>(i)] = p.pos + 1;
    max_pos = std::max(max_pos, p.pos + 1);
    if (!query_tiles_.empty()) {
      QueryTile& last = query_tiles_.back();
      if (last.n_q < tile_tokens_ && plan_[static_cast<size_t>(last.first)].seq == p.seq) {
        ++last.n_q;
        continue;
      }
    }
    query_tiles_.push_back({i, 1});
  }
  const auto scratch_floats =
      static_cast<size_t>(kernels::AttentionScratchFloats(max_pos, c.head_dim_k));
  for (auto& s : att_scratch_) {
    if (s.size() < scratch_floats) s.resize(scratch_floats);
  }

  size_t attn_index = 0, rec_index = 0;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    switch (c.layers[l].kind) {
      case LayerKind::kAttentionFfn:
        AttentionLayer(l, attn_index++, n);
        FfnLayer(l, n, /*gated=*/true);
        break;
      case LayerKind::kAttention:
        AttentionLayer(l, attn_index++, n);
        break;
      case LayerKind::kMlp:
        FfnLayer(l, n, /*gated=*/false);
        break;
      case LayerKind::kMamba2:
        Mamba2Layer(l, rec_index++, n);
        break;
    }
  }

  // Every sequence now holds its new positions.
  for (const Planned& p : plan_) p.seq->CommitTokens(p.pos + 1);
  Output(batch, logits);
  return Status::Ok();
}

void Runner::AttentionLayer(size_t layer, size_t attn_index, int64_t n) {
  const ModelConfig& c = model_.config();
  const LayerConfig& lc = c.layers[layer];
  const LayerWeights& w = model_.layer(static_cast<int64_t>(layer));
  const int64_t e = c.n_embd, hd = c.head_dim_k;
  const int64_t q_dim = lc.n_head * hd, kv_dim = lc.n_kv_head * hd;

  for (int64_t i = 0; i < n; ++i) {
    kernels::RmsNorm(&x_[i * e], w.attn_norm.data(), e, c.rms_eps, &h_[i * e]);
  }
  q_.resize(static_cast<size_t>(n * q_dim));
  k_.resize(static_cast<size_t>(n * kv_dim));
  v_.resize(static_cast<size_t>(n * kv_dim));
  const kernels::MatMulJob qkv[] = {{w.wq, h_.data(), e, n, q_.data(), q_dim},
                                     {w.wk, h_.data(), e, n, k_.data(), kv_dim},
                                     {w.wv, h_.data(), e, n, v_.data(), kv_dim}};
  kernels::MatMuls(qkv, &pool_);

  for (int64_t i = 0; i < n; ++i) {
    float* q = &q_[i * q_dim];
    float* k = &k_[i * kv_dim];
    float* v = &v_[i * kv_dim];
    if (c.qkv_bias) {
      kernels::Add(w.bq.data(), q_dim, q);
      kernels::Add(w.bk.data(), kv_dim, k);
      kernels::Add(w.bv.data(), kv_dim, v);
    }
    if (c.qk_norm) {
      for (int h = 0; h < lc.n_head; ++h) kernels::RmsNorm(q + h * hd, w.q_norm.data(), hd, c.rms_eps, q + h * hd);
      for (int h = 0; h < lc.n_kv_head; ++h) kernels::RmsNorm(k + h * hd, w.k_norm.data(), hd, c.rms_eps, k + h * hd);
    }
    const int64_t pos = plan_[static_cast<size_t>(i)].pos;
    if (c.use_rope) {
      kernels::Rope(q, lc.n_head, static_cast<int>(hd), c.rope, pos);
      kernels::Rope(k, lc.n_kv_head, static_cast<int>(hd), c.rope, pos);
    }
    SequenceState* seq = plan_[static_cast<size_t>(i)].seq;
    kernels::StoreKvRow(layout_->kv_type, k, kv_dim, seq->k_row(attn_index, pos));
    kernels::StoreKvRow(layout_->kv_type, v, kv_dim, seq->v_row(attn_index, pos));
  }

  // Attention: one task per (query tile, kv head) — the tile's queries and
  // the heads sharing that kv head read its K/V rows together — or, when
  // that gives fewer tasks than threads (generation of one sequence with one
  // kv head), one task per (query tile, head). Each query reads only its own sequence's
  // rows [0, pos] and gets the same bits either way (kernels.h AttentionRows).
  att_.resize(static_cast<size_t>(n * q_dim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t row_bytes = layout_->kv_row_bytes(attn_index);
  const size_t elt = layout_->kv_type == DType::kF16 ? 2 : 4;
  const int group = lc.n_head / lc.n_kv_head;
  const auto n_tiles = static_cast<int64_t>(query_tiles_.size());
  const int per_tile =
      n_tiles * lc.n_kv_head >= static_cast<int64_t>(pool_.n_threads()) ? lc.n_kv_head
                                                                        : lc.n_head;
  const int heads_per_task = lc.n_head / per_tile;
  pool_.ParallelFor(n_tiles * per_tile, [&](int64_t task, int thread) {
    const QueryTile& tile = query_tiles_[static_cast<size_t>(task / per_tile)];
    const int h0 = static_cast<int>(task % per_tile) * heads_per_task;
    const SequenceState* seq = plan_[static_cast<size_t>(tile.first)].seq;
    const size_t head_off = static_cast<size_t>(h0 / group) * static_cast<size_t>(hd) * elt;
    kernels::KvView kv;
    kv.type = layout_->kv_type;
    kv.k = seq->k_data(attn_index) + head_off;
    kv.v = seq->v_data(attn_index) + head_off;
    kv.row_bytes = row_bytes;
    kv.n_kv_head = 1;
    kv.head_dim = static_cast<int>(hd);
    const int64_t first = tile.first * q_dim + h0 * hd;
    kernels::AttentionRows(&q_[static_cast<size_t>(first)], q_dim, tile.n_q, heads_per_task, kv,
                           &n_pos_[static_cast<size_t>(tile.first)], scale,
                           &att_[static_cast<size_t>(first)], q_dim,
                           att_scratch_[static_cast<size_t>(thread)].data());
  });

  kernels::MatMul(w.wo, att_.data(), q_dim, n, out_.data(), e, &pool_);
  kernels::Add(out_.data(), n * e, x_.data());
}

void Runner::FfnLayer(size_t layer, int64_t n, bool gated) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layer(static_cast<int64_t>(layer));
  const int64_t e = c.n_embd, ff = c.layers[layer].n_ff;
  const std::vector<float>& norm = gated ? w.ffn_norm : w.attn_norm;
  for (int64_t i = 0; i < n; ++i) {
    kernels::RmsNorm(&x_[i * e], norm.data(), e, c.rms_eps, &h_[i * e]);
  }
  ff1_.resize(static_cast<size_t>(n * ff));
  if (gated) {
    ff2_.resize(static_cast<size_t>(n * ff));
    const kernels::MatMulJob gate_up[] = {{w.w_gate, h_.data(), e, n, ff1_.data(), ff},
                                          {w.w_up, h_.data(), e, n, ff2_.data(), ff}};
    kernels::MatMuls(gate_up, &pool_);
    kernels::SwiGlu(ff1_.data(), ff2_.data(), n * ff, ff1_.data());
  } else {
    kernels::MatMul(w.w_up, h_.data(), e, n, ff1_.data(), ff, &pool_);
    kernels::ReluSquared(ff1_.data(), n * ff);
  }
  kernels::MatMul(w.w_down, ff1_.data(), ff, n, out_.data(), e, &pool_);
  kernels::Add(out_.data(), n * e, x_.data());
}

void Runner::Output(std::span<const BatchEntry> batch, std::vector<float>* logits) {
  const ModelConfig& c = model_.config();
  const int64_t e = c.n_embd;
  int64_t n_out = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].want_logits) continue;
    kernels::RmsNorm(&x_[i * e], model_.output_norm().data(), e, c.rms_eps, &h_[n_out * e]);
    ++n_out;
  }
  logits->resize(static_cast<size_t>(n_out * c.n_vocab));
  if (n_out > 0) {
    kernels::MatMul(model_.output(), h_.data(), e, n_out, logits->data(), c.n_vocab, &pool_);
  }
}

}  // namespace mx::models
