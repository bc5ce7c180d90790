#include "models/model.h"

#include <string>

#include "models/architecture.h"
#include "models/weight_binder.h"

namespace mx::models {

Result<std::unique_ptr<Model>> Model::Load(Env* env, const std::string& path,
                                           const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  MX_ASSIGN_OR_RETURN(m->file_, gguf::GgufFile::Open(env, path));
  auto config = ModelConfig::FromGguf(*m->file_);
  if (!config.ok()) return config.status().WithContext(path);
  m->config_ = std::move(config).value();
  const ModelConfig& c = m->config_;

  const Architecture* arch = FindArchitecture(ArchName(c.arch));
  WeightBinder b(*m->file_);
  auto bind = [&]() -> Status {
    MX_ASSIGN_OR_RETURN(m->token_embd_, b.Mat("token_embd.weight", c.n_embd, c.n_vocab));
    MX_ASSIGN_OR_RETURN(m->output_norm_, b.Vec("output_norm.weight", {c.n_embd}));
    MX_RETURN_IF_ERROR(BindRopeFactors(b, m->config_));
    if (m->file_->FindTensor("output.weight") != nullptr) {
      MX_ASSIGN_OR_RETURN(m->output_, b.Mat("output.weight", c.n_embd, c.n_vocab));
    } else {
      m->config_.tied_output = true;
      m->output_ = m->token_embd_;
    }
    m->layers_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t i = 0; i < c.n_layer; ++i) {
      MX_RETURN_IF_ERROR(arch->bind_layer(b, c, i, m->layers_[static_cast<size_t>(i)]));
    }
    return Status::Ok();
  };
  Status st = bind();
  if (!st.ok()) return st.WithContext(path);
  m->weight_bytes_ = b.bytes();
  m->weight_copies_ = b.TakeCopies();
  m->copied_tensors_ = b.copied();

  // Prefault the mapping page by page (one byte per 4 KiB) so that loading
  // shows progress and the first request does not stall on page faults.
  const uint8_t* data = m->file_->file_data();
  const size_t size = m->file_->file_size();
  if (options.prefault || options.progress) {
    volatile uint8_t sink = 0;
    constexpr size_t kStep = 4096, kReport = size_t{64} << 20;
    for (size_t off = 0; off < size; off += kStep) {
      // (Not the tensors copied out: their pages were let go.)
      if (options.prefault && !b.Copied(off)) sink = sink + data[off];
      if (options.progress && off % kReport == 0) options.progress(off, size);
    }
    (void)sink;
    if (options.progress) options.progress(size, size);
  }
  return m;
}

void Model::DropCopiedFilePages() const {
  for (const gguf::TensorInfo* t : copied_tensors_) file_->DropPages(t->data, t->n_bytes);
}

}  // namespace mx::models
