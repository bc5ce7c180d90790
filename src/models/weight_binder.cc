#include "models/weight_binder.h"

#include <algorithm>
#include <cstring>

namespace mx::models {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Result<const gguf::TensorInfo*> WeightBinder::Find(const std::string& name,
                                                   std::vector<int64_t> shape) {
  const gguf::TensorInfo* t = f_.FindTensor(name);
  if (t == nullptr) return Status::NotFound("missing tensor '" + name + "'");
  // Trailing 1s do not count (GGUF may store [n, 1] for a vector).
  auto trim = [](std::vector<int64_t> s) {
    while (s.size() > 1 && s.back() == 1) s.pop_back();
    return s;
  };
  if (trim(t->shape) != trim(shape)) {
    return Status::InvalidArgument("tensor '" + name + "' has shape " + ShapeString(t->shape) +
                                   ", expected " + ShapeString(shape));
  }
  return t;
}

Result<Matrix> WeightBinder::Mat(const std::string& name, int64_t n_in, int64_t n_out) {
  return MatOf(name, {n_in, n_out}, n_in, n_out);
}

Result<ExpertMatrix> WeightBinder::Experts(const std::string& name, int64_t n_in, int64_t n_out,
                                           int64_t n_expert, int64_t n_out_all, int half) {
  ExpertMatrix m;
  MX_ASSIGN_OR_RETURN(m.all, MatOf(name, {n_in, n_out_all, n_expert}, n_in, n_out_all * n_expert));
  m.n_out = n_out;
  m.stride = n_out_all;
  m.first = half * n_out;
  return m;
}

Result<Matrix> WeightBinder::MatOf(const std::string& name, std::vector<int64_t> shape,
                                   int64_t n_in, int64_t n_out) {
  MX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, std::move(shape)));
  if (!kernels::WeightTypeSupported(t->type)) {
    return Status::NotSupported("tensor '" + name + "' has weight type " + DTypeName(t->type) +
                                ", which this engine does not support yet");
  }
  Matrix m;
  m.type = t->type;
  m.data = t->data;
  m.n_cols = n_in;
  m.n_rows = n_out;
  m.row_bytes = RowBytes(t->type, n_in);
  if (counted_.insert(t).second) bytes_ += t->n_bytes;
  const size_t align = kernels::FastRowAlignment(t->type);
  if (align > 1 && n_out > 0 &&
      (reinterpret_cast<uintptr_t>(m.data) % align != 0 || m.row_bytes % align != 0)) {
    const size_t stride = (m.row_bytes + align - 1) / align * align;
    const size_t n = stride * static_cast<size_t>(n_out);
    OwnedBytes copy(static_cast<uint8_t*>(std::aligned_alloc(align, n)));
    if (copy == nullptr) {
      return Status::ResourceExhausted("no memory for an aligned copy of tensor '" + name + "' (" +
                                       std::to_string(n) + " bytes)");
    }
    for (int64_t r = 0; r < n_out; ++r) {
      uint8_t* dst = copy.get() + static_cast<size_t>(r) * stride;
      std::memcpy(dst, m.data + static_cast<size_t>(r) * m.row_bytes, m.row_bytes);
      std::memset(dst + m.row_bytes, 0, stride - m.row_bytes);
    }
    m.data = copy.get();
    m.row_bytes = stride;
    copies_.push_back(std::move(copy));
    // Kept in file order (tensors do not overlap) for Copied's search.
    const auto at = std::lower_bound(
        copied_.begin(), copied_.end(), t,
        [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) { return a->data < b->data; });
    if (at == copied_.end() || *at != t) copied_.insert(at, t);
    f_.DropPages(t->data, t->n_bytes);
  }
  return m;
}

bool WeightBinder::Copied(size_t file_offset) const {
  const uint8_t* p = f_.file_data() + file_offset;
  // The last tensor starting at or before p.
  const auto after =
      std::upper_bound(copied_.begin(), copied_.end(), p,
                       [](const uint8_t* q, const gguf::TensorInfo* t) { return q < t->data; });
  if (after == copied_.begin()) return false;
  const gguf::TensorInfo* t = *(after - 1);
  return p < t->data + t->n_bytes;
}

Result<std::vector<float>> WeightBinder::Vec(const std::string& name, std::vector<int64_t> shape) {
  MX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, shape));
  int64_t n = t->n_elements();
  std::vector<float> out(static_cast<size_t>(n));
  if (t->type == DType::kF32) {
    std::memcpy(out.data(), t->data, static_cast<size_t>(n) * 4);
  } else if (kernels::WeightTypeSupported(t->type)) {
    kernels::DequantizeRow(t->type, t->data, out.data(), n);
  } else {
    return Status::NotSupported("tensor '" + name + "' has type " + DTypeName(t->type));
  }
  bytes_ += t->n_bytes;
  return out;
}

std::string Blk(int64_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

Matrix RowSlice(const Matrix& m, int64_t first, int64_t n) {
  Matrix s = m;
  s.data = m.data + static_cast<size_t>(first) * m.row_bytes;
  s.n_rows = n;
  return s;
}

Status BindRopeFactors(WeightBinder& b, ModelConfig& c) {
  const int64_t half = c.rope.n_rot / 2;
  const std::pair<const char*, std::vector<float>*> tables[] = {
      {"rope_freqs.weight", &c.rope_freqs},
      {"rope_factors_long.weight", &c.rope_factors_long},
      {"rope_factors_short.weight", &c.rope_factors_short}};
  for (const auto& [name, out] : tables) {
    if (!b.Has(name)) continue;
    MX_ASSIGN_OR_RETURN(*out, b.Vec(name, {half}));
    for (size_t i = 0; i < out->size(); ++i) {
      const float v = (*out)[i];
      if (!(v > 0.0f && v < 1e30f)) {
        return Status::InvalidArgument("tensor '" + std::string(name) + "' entry " +
                                       std::to_string(i) + " = " + std::to_string(v) +
                                       ", expected a positive frequency divisor");
      }
    }
  }
  return Status::Ok();
}

Status BindAttention(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
  const int64_t e = c.n_embd;
  const int64_t q_dim = lc.n_head * c.head_dim_k;
  const int64_t kv_dim = lc.n_kv_head * c.head_dim_k;
  const int64_t q_rows = lc.mixer == Mixer::kGatedAttention ? 2 * q_dim : q_dim;
  MX_ASSIGN_OR_RETURN(w.attn_norm, b.Vec(Blk(i, "attn_norm.weight"), {e}));
  MX_ASSIGN_OR_RETURN(w.wq, b.Mat(Blk(i, "attn_q.weight"), e, q_rows));
  MX_ASSIGN_OR_RETURN(w.wk, b.Mat(Blk(i, "attn_k.weight"), e, kv_dim));
  MX_ASSIGN_OR_RETURN(w.wv, b.Mat(Blk(i, "attn_v.weight"), e, kv_dim));
  MX_ASSIGN_OR_RETURN(w.wo, b.Mat(Blk(i, "attn_output.weight"), q_dim, e));
  if (c.qkv_bias) {
    MX_ASSIGN_OR_RETURN(w.bq, b.Vec(Blk(i, "attn_q.bias"), {q_dim}));
    MX_ASSIGN_OR_RETURN(w.bk, b.Vec(Blk(i, "attn_k.bias"), {kv_dim}));
    MX_ASSIGN_OR_RETURN(w.bv, b.Vec(Blk(i, "attn_v.bias"), {kv_dim}));
  }
  if (c.qk_norm) {
    MX_ASSIGN_OR_RETURN(w.q_norm, b.Vec(Blk(i, "attn_q_norm.weight"), {c.head_dim_k}));
    MX_ASSIGN_OR_RETURN(w.k_norm, b.Vec(Blk(i, "attn_k_norm.weight"), {c.head_dim_k}));
  }
  return Status::Ok();
}

Status BindMamba2(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  const int64_t e = c.n_embd, d_inner = c.ssm_d_inner, ch = c.ssm_conv_channels();
  const int64_t h = c.ssm_n_head, g = c.ssm_n_group;
  MX_ASSIGN_OR_RETURN(w.attn_norm, b.Vec(Blk(i, "attn_norm.weight"), {e}));
  MX_ASSIGN_OR_RETURN(w.ssm_in, b.Mat(Blk(i, "ssm_in.weight"), e, d_inner + ch + h));
  MX_ASSIGN_OR_RETURN(w.ssm_conv_w, b.Vec(Blk(i, "ssm_conv1d.weight"), {c.ssm_d_conv, ch}));
  if (b.Has(Blk(i, "ssm_conv1d.bias"))) {
    MX_ASSIGN_OR_RETURN(w.ssm_conv_b, b.Vec(Blk(i, "ssm_conv1d.bias"), {ch}));
  } else {
    w.ssm_conv_b.assign(static_cast<size_t>(ch), 0.0f);
  }
  MX_ASSIGN_OR_RETURN(w.ssm_dt_bias, b.Vec(Blk(i, "ssm_dt.bias"), {h}));
  MX_ASSIGN_OR_RETURN(w.ssm_a, b.Vec(Blk(i, "ssm_a"), {1, h}));
  MX_ASSIGN_OR_RETURN(w.ssm_d, b.Vec(Blk(i, "ssm_d"), {1, h}));
  MX_ASSIGN_OR_RETURN(w.ssm_norm, b.Vec(Blk(i, "ssm_norm.weight"), {d_inner / g, g}));
  MX_ASSIGN_OR_RETURN(w.ssm_out, b.Mat(Blk(i, "ssm_out.weight"), d_inner, e));
  return Status::Ok();
}

Status BindDeltaNet(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  const int64_t e = c.n_embd, d_inner = c.ssm_d_inner, ch = c.ssm_conv_channels();
  const int64_t h = c.ssm_n_head;
  MX_ASSIGN_OR_RETURN(w.attn_norm, b.Vec(Blk(i, "attn_norm.weight"), {e}));
  MX_ASSIGN_OR_RETURN(w.ssm_qkv, b.Mat(Blk(i, "attn_qkv.weight"), e, ch));
  MX_ASSIGN_OR_RETURN(w.ssm_gate, b.Mat(Blk(i, "attn_gate.weight"), e, d_inner));
  MX_ASSIGN_OR_RETURN(w.ssm_alpha, b.Mat(Blk(i, "ssm_alpha.weight"), e, h));
  MX_ASSIGN_OR_RETURN(w.ssm_beta, b.Mat(Blk(i, "ssm_beta.weight"), e, h));
  MX_ASSIGN_OR_RETURN(w.ssm_conv_w, b.Vec(Blk(i, "ssm_conv1d.weight"), {c.ssm_d_conv, ch}));
  // Tap-major, so the conv runs along channels (contiguous in the window).
  w.ssm_conv_taps.resize(w.ssm_conv_w.size());
  for (int64_t k = 0; k < c.ssm_d_conv; ++k) {
    for (int64_t j = 0; j < ch; ++j) {
      w.ssm_conv_taps[static_cast<size_t>(k * ch + j)] =
          w.ssm_conv_w[static_cast<size_t>(j * c.ssm_d_conv + k)];
    }
  }
  if (b.Has(Blk(i, "ssm_conv1d.bias"))) {
    MX_ASSIGN_OR_RETURN(w.ssm_conv_b, b.Vec(Blk(i, "ssm_conv1d.bias"), {ch}));
  } else {
    w.ssm_conv_b.assign(static_cast<size_t>(ch), 0.0f);
  }
  MX_ASSIGN_OR_RETURN(w.ssm_dt_bias, b.Vec(Blk(i, "ssm_dt.bias"), {h}));
  MX_ASSIGN_OR_RETURN(w.ssm_a, b.Vec(Blk(i, "ssm_a"), {h}));
  MX_ASSIGN_OR_RETURN(w.ssm_norm, b.Vec(Blk(i, "ssm_norm.weight"), {d_inner / h}));
  MX_ASSIGN_OR_RETURN(w.ssm_out, b.Mat(Blk(i, "ssm_out.weight"), d_inner, e));
  return Status::Ok();
}

namespace {

// The mixture of experts of layer i (ModelConfig::moe) behind `norm`:
// router, experts (ffn_{gate,up,down}_exps, or a merged ffn_gate_up_exps),
// their biases and the shared expert, as the config asks.
Status BindMoe(WeightBinder& b, const ModelConfig& c, int64_t i, const char* norm,
               LayerWeights& w) {
  const MoeConfig& m = c.moe;
  const int64_t e = c.n_embd, ne = m.n_expert, ff = m.n_ff_expert;
  MoeWeights& x = w.moe;
  MX_ASSIGN_OR_RETURN(w.ffn_norm, b.Vec(Blk(i, norm), {e}));
  MX_ASSIGN_OR_RETURN(x.router, b.Mat(Blk(i, "ffn_gate_inp.weight"), e, ne));
  if (m.router_bias) {
    MX_ASSIGN_OR_RETURN(x.router_bias, b.Vec(Blk(i, "ffn_gate_inp.bias"), {ne}));
  }
  if (m.selection_bias) {
    MX_ASSIGN_OR_RETURN(x.selection_bias, b.Vec(Blk(i, "exp_probs_b.bias"), {ne}));
  }
  const bool gated = m.expert_ffn != Ffn::kReluSquared;
  if (gated && b.Has(Blk(i, "ffn_gate_up_exps.weight"))) {
    const std::string merged = Blk(i, "ffn_gate_up_exps.weight");
    MX_ASSIGN_OR_RETURN(x.gate, b.Experts(merged, e, ff, ne, 2 * ff, 0));
    MX_ASSIGN_OR_RETURN(x.up, b.Experts(merged, e, ff, ne, 2 * ff, 1));
  } else {
    if (gated) {
      MX_ASSIGN_OR_RETURN(x.gate, b.Experts(Blk(i, "ffn_gate_exps.weight"), e, ff, ne, ff));
    }
    MX_ASSIGN_OR_RETURN(x.up, b.Experts(Blk(i, "ffn_up_exps.weight"), e, ff, ne, ff));
  }
  MX_ASSIGN_OR_RETURN(x.down, b.Experts(Blk(i, "ffn_down_exps.weight"), ff, e, ne, e));
  if (m.expert_biases) {
    MX_ASSIGN_OR_RETURN(x.gate_bias, b.Vec(Blk(i, "ffn_gate_exps.bias"), {ff, ne}));
    MX_ASSIGN_OR_RETURN(x.up_bias, b.Vec(Blk(i, "ffn_up_exps.bias"), {ff, ne}));
    MX_ASSIGN_OR_RETURN(x.down_bias, b.Vec(Blk(i, "ffn_down_exps.bias"), {e, ne}));
  }
  if (m.n_ff_shared > 0) {
    const int64_t fs = m.n_ff_shared;
    if (gated) {
      MX_ASSIGN_OR_RETURN(x.shared_gate, b.Mat(Blk(i, "ffn_gate_shexp.weight"), e, fs));
    }
    MX_ASSIGN_OR_RETURN(x.shared_up, b.Mat(Blk(i, "ffn_up_shexp.weight"), e, fs));
    MX_ASSIGN_OR_RETURN(x.shared_down, b.Mat(Blk(i, "ffn_down_shexp.weight"), fs, e));
    if (m.shared_gate) {
      MX_ASSIGN_OR_RETURN(x.shared_gate_inp, b.Vec(Blk(i, "ffn_gate_inp_shexp.weight"), {e}));
    }
  }
  return Status::Ok();
}

}  // namespace

Status BindFfn(WeightBinder& b, const ModelConfig& c, int64_t i, const char* norm,
               LayerWeights& w) {
  const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
  if (lc.ffn == Ffn::kMoe) return BindMoe(b, c, i, norm, w);
  const int64_t e = c.n_embd;
  MX_ASSIGN_OR_RETURN(w.ffn_norm, b.Vec(Blk(i, norm), {e}));
  if (lc.ffn == Ffn::kSwiGlu || lc.ffn == Ffn::kGeGlu) {
    MX_ASSIGN_OR_RETURN(w.w_gate, b.Mat(Blk(i, "ffn_gate.weight"), e, lc.n_ff));
  }
  MX_ASSIGN_OR_RETURN(w.w_up, b.Mat(Blk(i, "ffn_up.weight"), e, lc.n_ff));
  MX_ASSIGN_OR_RETURN(w.w_down, b.Mat(Blk(i, "ffn_down.weight"), lc.n_ff, e));
  return Status::Ok();
}

}  // namespace mx::models
