#include "models/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "models/moe_router.h"

namespace mx::models {

Result<std::unique_ptr<Runner>> Runner::Create(const Model& model, const RunnerOptions& options) {
  const ModelConfig& c = model.config();
  const DType k_type = options.k_type.value_or(options.kv_type),
              v_type = options.v_type.value_or(options.kv_type);
  const bool has_attention = std::any_of(c.layers.begin(), c.layers.end(),
                                         [](const LayerConfig& l) { return l.has_attention(); });
  for (const auto& [what, type] : {std::pair{"K", k_type}, std::pair{"V", v_type}}) {
    if (!kernels::KvTypeSupported(type)) {
      return Status::InvalidArgument(std::string(what) + " cache type " + DTypeName(type) +
                                     " is not supported (F16, F32, Q8_0 or Q4_0)");
    }
    // A quantized row holds whole blocks per head (no fallback: the memory
    // the setting promises would not be what the pool gets).
    if (has_attention && kernels::KvHeadBytes(type, c.head_dim_k) == 0) {
      return Status::InvalidArgument(std::string(what) + " cache type " + DTypeName(type) +
                                     " stores blocks of " +
                                     std::to_string(kernels::kKvBlockValues) +
                                     " values, but this model's attention heads have " +
                                     std::to_string(c.head_dim_k) + " dims (not a multiple of " +
                                     std::to_string(kernels::kKvBlockValues) + "): use f16 or f32");
    }
  }
  int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(c.n_ctx_train, 8192);
  if (n_ctx > (int64_t{1} << 24)) {
    return Status::InvalidArgument("context size " + std::to_string(n_ctx) + " is too large");
  }
  auto layout =
      std::make_shared<const StateLayout>(StateLayout::ForModel(c, k_type, v_type, n_ctx));
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
  if (model_.config().moe.n_expert > 0) router_ = std::make_unique<MoeRouter>(model_.config().moe);
}

Runner::~Runner() = default;

std::unique_ptr<SequenceState> Runner::NewSequence() const {
  auto seq = std::make_unique<SequenceState>(layout_);
  seq->set_copy_pool(&pool_);
  return seq;
}

Status Runner::Adopt(SequenceState* seq) const {
  MX_RETURN_IF_ERROR(seq->Rebind(layout_));
  seq->set_copy_pool(&pool_);
  return Status::Ok();
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
    if (e.embedding == nullptr && (e.token < 0 || e.token >= n_vocab)) {
      return Status::InvalidArgument("token id " + std::to_string(e.token) +
                                     " is out of range [0, " + std::to_string(n_vocab) + ")");
    }
    auto [it, inserted] = next_pos.try_emplace(e.seq, e.seq->n_tokens());
    plan_.push_back({e.seq, it->second, e.has_pos ? e.pos : kernels::RopePos::Text(it->second)});
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
    float* row = &x_[static_cast<size_t>(i * e)];
    if (batch[i].embedding != nullptr) {
      std::memcpy(row, batch[i].embedding, static_cast<size_t>(e) * sizeof(float));
    } else {
      kernels::DequantizeRow(emb.type, emb.data + static_cast<size_t>(batch[i].token) * emb.row_bytes,
                             row, e);
      if (c.embedding_scale != 1.0f) {
        for (int64_t j = 0; j < e; ++j) row[j] *= c.embedding_scale;
      }
    }
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

  // Each sequence's entries, in order, for the recurrent mixers.
  seq_entries_.clear();
  {
    std::unordered_map<SequenceState*, size_t> index;
    for (int64_t i = 0; i < n; ++i) {
      auto [it, inserted] = index.try_emplace(plan_[static_cast<size_t>(i)].seq, seq_entries_.size());
      if (inserted) seq_entries_.emplace_back();
      seq_entries_[it->second].push_back(i);
    }
  }

  // The layers (architecture.h): x += Mixer(rms(x)); x += Ffn(rms(x)).
  size_t attn_index = 0, rec_index = 0;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerConfig& lc = c.layers[l];
    const LayerWeights& w = model_.layer(static_cast<int64_t>(l));
    if (lc.mixer != Mixer::kNone) {
      Norm(w.attn_norm, n);
      switch (lc.mixer) {
        case Mixer::kAttention:
        case Mixer::kGatedAttention: AttentionMixer(l, attn_index++, n); break;
        case Mixer::kMamba2: Mamba2Mixer(l, rec_index++, n); break;
        case Mixer::kDeltaNet: DeltaNetMixer(l, rec_index++, n); break;
        case Mixer::kNone: break;
      }
      if (c.post_norms) PostNorm(w.post_attn_norm, n);
      AddResidual(n);
    }
    if (lc.ffn != Ffn::kNone) {
      Norm(w.ffn_norm, n);
      if (lc.ffn == Ffn::kMoe) {
        MoeBlock(l, n);
      } else {
        FfnBlock(l, n);
      }
      if (c.post_norms) PostNorm(w.post_ffn_norm, n);
      AddResidual(n);
    }
  }

  // Every sequence now holds its new positions.
  for (const Planned& p : plan_) p.seq->CommitTokens(p.pos + 1);
  Output(batch, logits);
  return Status::Ok();
}

void Runner::AddResidual(int64_t n) {
  const ModelConfig& c = model_.config();
  const int64_t size = n * c.n_embd;
  if (c.residual_scale != 1.0f) {
    for (int64_t j = 0; j < size; ++j) out_[static_cast<size_t>(j)] *= c.residual_scale;
  }
  kernels::Add(out_.data(), size, x_.data());
}

void Runner::Norm(const std::vector<float>& w, int64_t n) {
  const ModelConfig& c = model_.config();
  const int64_t e = c.n_embd;
  for (int64_t i = 0; i < n; ++i) {
    kernels::RmsNorm(&x_[i * e], w.data(), e, c.rms_eps, &h_[i * e]);
  }
}

void Runner::PostNorm(const std::vector<float>& w, int64_t n) {
  const ModelConfig& c = model_.config();
  const int64_t e = c.n_embd;
  for (int64_t i = 0; i < n; ++i) {
    kernels::RmsNorm(&out_[i * e], w.data(), e, c.rms_eps, &out_[i * e]);
  }
}

void Runner::FfnBlock(size_t layer, int64_t n) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layer(static_cast<int64_t>(layer));
  const int64_t e = c.n_embd, ff = c.layers[layer].n_ff;
  ff1_.resize(static_cast<size_t>(n * ff));
  const Ffn kind = c.layers[layer].ffn;
  if (kind == Ffn::kSwiGlu || kind == Ffn::kGeGlu) {
    ff2_.resize(static_cast<size_t>(n * ff));
    const kernels::MatMulJob gate_up[] = {{w.w_gate, h_.data(), e, n, ff1_.data(), ff},
                                          {w.w_up, h_.data(), e, n, ff2_.data(), ff}};
    kernels::MatMuls(gate_up, &pool_);
    if (kind == Ffn::kSwiGlu) {
      kernels::SwiGlu(ff1_.data(), ff2_.data(), n * ff, ff1_.data());
    } else {
      kernels::GeGluF16Table(ff1_.data(), ff2_.data(), n * ff, ff1_.data());
    }
  } else {
    kernels::MatMul(w.w_up, h_.data(), e, n, ff1_.data(), ff, &pool_);
    kernels::ReluSquared(ff1_.data(), n * ff);
  }
  kernels::MatMul(w.w_down, ff1_.data(), ff, n, out_.data(), e, &pool_);
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
    if (c.logit_scale != 1.0f) {
      for (float& v : *logits) v /= c.logit_scale;
    }
    if (c.final_logit_softcap > 0.0f) {
      const float cap = c.final_logit_softcap, inv = 1.0f / cap;
      for (float& v : *logits) v = std::tanh(v * inv) * cap;
    }
  }
}

}  // namespace mx::models
