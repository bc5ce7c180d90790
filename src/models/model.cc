#include "models/model.h"

#include <cstring>
#include <string>

namespace mx::models {

// Looks tensors up by name and checks their shapes and types.
class WeightBinder {
 public:
  explicit WeightBinder(const gguf::GgufFile& f) : f_(f) {}

  static std::string ShapeString(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  Result<const gguf::TensorInfo*> Find(const std::string& name, std::vector<int64_t> shape) {
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

  Result<Matrix> Mat(const std::string& name, int64_t n_in, int64_t n_out) {
    MX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {n_in, n_out}));
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
    bytes_ += t->n_bytes;
    return m;
  }

  // Any supported type, converted to f32; shape given with ne[0] first.
  Result<std::vector<float>> Vec(const std::string& name, std::vector<int64_t> shape) {
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

  uint64_t bytes() const { return bytes_; }

 private:
  const gguf::GgufFile& f_;
  uint64_t bytes_ = 0;
};

namespace {

std::string Blk(int64_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

Status BindLayer(WeightBinder& b, const ModelConfig& c, int64_t i, LayerWeights& w) {
  const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
  const int64_t e = c.n_embd;
  MX_ASSIGN_OR_RETURN(w.attn_norm, b.Vec(Blk(i, "attn_norm.weight"), {e}));
  if (lc.has_attention()) {
    const int64_t q_dim = lc.n_head * c.head_dim_k;
    const int64_t kv_dim = lc.n_kv_head * c.head_dim_k;
    MX_ASSIGN_OR_RETURN(w.wq, b.Mat(Blk(i, "attn_q.weight"), e, q_dim));
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
  }
  if (lc.kind == LayerKind::kAttentionFfn) {
    MX_ASSIGN_OR_RETURN(w.ffn_norm, b.Vec(Blk(i, "ffn_norm.weight"), {e}));
    MX_ASSIGN_OR_RETURN(w.w_gate, b.Mat(Blk(i, "ffn_gate.weight"), e, lc.n_ff));
  }
  if (lc.kind == LayerKind::kAttentionFfn || lc.kind == LayerKind::kMlp) {
    MX_ASSIGN_OR_RETURN(w.w_up, b.Mat(Blk(i, "ffn_up.weight"), e, lc.n_ff));
    MX_ASSIGN_OR_RETURN(w.w_down, b.Mat(Blk(i, "ffn_down.weight"), lc.n_ff, e));
  }
  if (lc.kind == LayerKind::kMamba2) {
    const int64_t d_inner = c.ssm_d_inner, ch = c.ssm_conv_channels(), h = c.ssm_n_head;
    const int64_t g = c.ssm_n_group;
    MX_ASSIGN_OR_RETURN(w.ssm_in, b.Mat(Blk(i, "ssm_in.weight"), e, d_inner + ch + h));
    MX_ASSIGN_OR_RETURN(w.ssm_conv_w, b.Vec(Blk(i, "ssm_conv1d.weight"), {c.ssm_d_conv, ch}));
    if (b.Find(Blk(i, "ssm_conv1d.bias"), {ch}).ok()) {
      MX_ASSIGN_OR_RETURN(w.ssm_conv_b, b.Vec(Blk(i, "ssm_conv1d.bias"), {ch}));
    } else {
      w.ssm_conv_b.assign(static_cast<size_t>(ch), 0.0f);
    }
    MX_ASSIGN_OR_RETURN(w.ssm_dt_bias, b.Vec(Blk(i, "ssm_dt.bias"), {h}));
    MX_ASSIGN_OR_RETURN(w.ssm_a, b.Vec(Blk(i, "ssm_a"), {1, h}));
    MX_ASSIGN_OR_RETURN(w.ssm_d, b.Vec(Blk(i, "ssm_d"), {1, h}));
    MX_ASSIGN_OR_RETURN(w.ssm_norm, b.Vec(Blk(i, "ssm_norm.weight"), {d_inner / g, g}));
    MX_ASSIGN_OR_RETURN(w.ssm_out, b.Mat(Blk(i, "ssm_out.weight"), d_inner, e));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::Load(Env* env, const std::string& path,
                                           const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  MX_ASSIGN_OR_RETURN(m->file_, gguf::GgufFile::Open(env, path));
  auto config = ModelConfig::FromGguf(*m->file_);
  if (!config.ok()) return config.status().WithContext(path);
  m->config_ = std::move(config).value();
  const ModelConfig& c = m->config_;

  WeightBinder b(*m->file_);
  auto bind = [&]() -> Status {
    MX_ASSIGN_OR_RETURN(m->token_embd_, b.Mat("token_embd.weight", c.n_embd, c.n_vocab));
    MX_ASSIGN_OR_RETURN(m->output_norm_, b.Vec("output_norm.weight", {c.n_embd}));
    if (m->file_->FindTensor("output.weight") != nullptr) {
      MX_ASSIGN_OR_RETURN(m->output_, b.Mat("output.weight", c.n_embd, c.n_vocab));
    } else {
      m->config_.tied_output = true;
      m->output_ = m->token_embd_;
    }
    m->layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t i = 0; i < c.n_layer; ++i) {
      MX_RETURN_IF_ERROR(BindLayer(b, c, i, m->layers_[static_cast<size_t>(i)]));
    }
    return Status::Ok();
  };
  Status st = bind();
  if (!st.ok()) return st.WithContext(path);
  m->weight_bytes_ = b.bytes();

  // Prefault the mapping page by page (one byte per 4 KiB) so that loading
  // shows progress and the first request does not stall on page faults.
  const uint8_t* data = m->file_->file_data();
  const size_t size = m->file_->file_size();
  if (options.prefault || options.progress) {
    volatile uint8_t sink = 0;
    constexpr size_t kStep = 4096, kReport = size_t{64} << 20;
    for (size_t off = 0; off < size; off += kStep) {
      if (options.prefault) sink = sink + data[off];
      if (options.progress && off % kReport == 0) options.progress(off, size);
    }
    (void)sink;
    if (options.progress) options.progress(size, size);
  }
  return m;
}

}  // namespace mx::models
