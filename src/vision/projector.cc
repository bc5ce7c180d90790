// Projector loading: the clip.* keys into ProjectorConfig, every tensor
// checked (name, shape, type) and bound into EncoderWeights; Encode's input
// checks. The forward pass lives in qwen3vl_encoder.cc.
#include "vision/projector.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "vision/vision_internal.h"

namespace mx::vision {
namespace {

constexpr const char* kQwen3VlMerger = "qwen3vl_merger";

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Blk(int64_t i, const char* name) { return "v.blk." + std::to_string(i) + "." + name; }

// Looks tensors up by name, checks shape and type, and binds them.
class Binder {
 public:
  explicit Binder(const gguf::GgufFile& f) : f_(f) {}

  // The tensor `name` with ggml shape `shape` (ne[0] first; trailing 1s do
  // not count).
  Result<const gguf::TensorInfo*> Find(const std::string& name, const std::vector<int64_t>& shape) {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return Status::NotFound("missing tensor '" + name + "'");
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

  // A matrix of shape[last] rows, each the product of the other dims long.
  Result<kernels::Matrix> Mat(const std::string& name, const std::vector<int64_t>& shape) {
    MX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, shape));
    int64_t n_cols = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) n_cols *= shape[i];
    const size_t row_bytes = RowBytes(t->type, n_cols);
    if (!kernels::WeightTypeSupported(t->type) || row_bytes == 0) {
      return Status::NotSupported("tensor '" + name + "' has type " + DTypeName(t->type) +
                                  ", which this engine does not support for a weight matrix");
    }
    kernels::Matrix m;
    m.type = t->type;
    m.data = t->data;
    m.n_cols = n_cols;
    m.n_rows = shape.back();
    m.row_bytes = row_bytes;
    bytes_ += t->n_bytes;
    return m;
  }

  // Any supported type, converted to an owned f32 vector.
  Result<std::vector<float>> Vec(const std::string& name, const std::vector<int64_t>& shape) {
    MX_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, shape));
    const int64_t n = t->n_elements();
    std::vector<float> out(static_cast<size_t>(n));
    if (t->type == DType::kF32) {
      std::memcpy(out.data(), t->data, static_cast<size_t>(n) * sizeof(float));
    } else if (kernels::WeightTypeSupported(t->type)) {
      kernels::DequantizeRow(t->type, t->data, out.data(), n);
    } else {
      return Status::NotSupported("tensor '" + name + "' has type " + DTypeName(t->type) +
                                  ", which this engine does not support");
    }
    bytes_ += t->n_bytes;
    return out;
  }

  uint64_t bytes() const { return bytes_; }

 private:
  const gguf::GgufFile& f_;
  uint64_t bytes_ = 0;
};

// An integer key in [lo, hi].
Result<int64_t> IntKey(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  MX_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v < lo || v > hi) {
    return Status::InvalidArgument(key + " is " + std::to_string(v) + ", expected " +
                                   std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

// The first three values of a float array key (image_mean, image_std).
Result<std::array<float, 3>> RgbKey(const gguf::GgufFile& f, const std::string& key) {
  MX_ASSIGN_OR_RETURN(std::vector<double> v, f.GetFloatArray(key));
  if (v.size() < 3) {
    return Status::InvalidArgument(key + " has " + std::to_string(v.size()) +
                                   " values, expected at least 3 (R, G, B)");
  }
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (!std::isfinite(v[i])) return Status::InvalidArgument(key + " holds a non-finite value");
    out[i] = static_cast<float>(v[i]);
  }
  return out;
}

Result<ProjectorConfig> ReadConfig(const gguf::GgufFile& f) {
  ProjectorConfig c;
  MX_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch != "clip") {
    return Status::InvalidArgument("general.architecture is '" + arch +
                                   "', expected 'clip' (not a projector file)");
  }
  auto has_vision = f.GetBool("clip.has_vision_encoder");
  if (!has_vision.ok()) return has_vision.status();
  if (!*has_vision) return Status::NotSupported("clip.has_vision_encoder is false");
  // Newer converters write the type per modality.
  auto type = f.Find("clip.projector_type") != nullptr ? f.GetString("clip.projector_type")
                                                       : f.GetString("clip.vision.projector_type");
  if (!type.ok()) return type.status();
  c.projector_type = *type;
  if (c.projector_type != kQwen3VlMerger) {
    return Status::NotSupported("projector type '" + c.projector_type +
                                "' is not supported (this engine runs " + kQwen3VlMerger + ")");
  }
  constexpr int64_t kMaxDim = 1 << 16;
  MX_ASSIGN_OR_RETURN(c.patch_size, IntKey(f, "clip.vision.patch_size", 1, 1024));
  MX_ASSIGN_OR_RETURN(c.n_embd, IntKey(f, "clip.vision.embedding_length", 1, kMaxDim));
  MX_ASSIGN_OR_RETURN(c.n_ff, IntKey(f, "clip.vision.feed_forward_length", 1, 4 * kMaxDim));
  MX_ASSIGN_OR_RETURN(c.n_layer, IntKey(f, "clip.vision.block_count", 1, 1024));
  MX_ASSIGN_OR_RETURN(c.n_head, IntKey(f, "clip.vision.attention.head_count", 1, kMaxDim));
  MX_ASSIGN_OR_RETURN(c.n_embd_out, IntKey(f, "clip.vision.projection_dim", 1, 4 * kMaxDim));
  MX_ASSIGN_OR_RETURN(c.image_size, IntKey(f, "clip.vision.image_size", 1, 1 << 20));
  // The Qwen graph merges 2x2 patches whatever the key says; absent means 2.
  c.merge = 2;
  if (f.Find("clip.vision.spatial_merge_size") != nullptr) {
    MX_ASSIGN_OR_RETURN(c.merge, IntKey(f, "clip.vision.spatial_merge_size", 1, 64));
    if (c.merge != 2) {
      return Status::NotSupported("clip.vision.spatial_merge_size is " + std::to_string(c.merge) +
                                  ", expected 2 (" + kQwen3VlMerger + " merges 2x2 patches)");
    }
  }
  MX_ASSIGN_OR_RETURN(double eps, f.GetFloat("clip.vision.attention.layer_norm_epsilon"));
  if (!(eps >= 0.0 && eps < 1.0)) {
    return Status::InvalidArgument("clip.vision.attention.layer_norm_epsilon is " +
                                   std::to_string(eps) + ", expected 0 <= eps < 1");
  }
  c.eps = static_cast<float>(eps);
  c.gelu = false;  // llama.cpp's default: gelu_quick
  if (f.Find("clip.use_gelu") != nullptr) {
    MX_ASSIGN_OR_RETURN(c.gelu, f.GetBool("clip.use_gelu"));
  }
  MX_ASSIGN_OR_RETURN(c.image_mean, RgbKey(f, "clip.vision.image_mean"));
  MX_ASSIGN_OR_RETURN(c.image_std, RgbKey(f, "clip.vision.image_std"));
  for (float s : c.image_std) {
    if (s == 0.0f) return Status::InvalidArgument("clip.vision.image_std holds a zero");
  }
  if (c.n_embd % c.n_head != 0 || c.head_dim() % 4 != 0) {
    return Status::InvalidArgument("clip.vision.embedding_length " + std::to_string(c.n_embd) +
                                   " over head_count " + std::to_string(c.n_head) +
                                   " must give a head size that is a multiple of 4 (2-D RoPE)");
  }
  return c;
}

Status BindWeights(const gguf::GgufFile& f, ProjectorConfig& c, internal::EncoderWeights& w,
                   uint64_t* bytes) {
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.rfind("v.deepstack.", 0) == 0) {
      return Status::NotSupported("tensor '" + t.name +
                                  "': deepstack layers are not supported (Qwen3-VL's deepstack "
                                  "mergers; Qwen 3.5 has none)");
    }
  }
  Binder b(f);
  const int64_t e = c.n_embd, p = c.patch_size, m4 = e * c.merge * c.merge;
  MX_ASSIGN_OR_RETURN(w.patch0, b.Mat("v.patch_embd.weight", {p, p, 3, e}));
  MX_ASSIGN_OR_RETURN(w.patch1, b.Mat("v.patch_embd.weight.1", {p, p, 3, e}));
  MX_ASSIGN_OR_RETURN(w.patch_b, b.Vec("v.patch_embd.bias", {e}));

  // The position grid's side comes from its row count, which must be square.
  const gguf::TensorInfo* pos = f.FindTensor("v.position_embd.weight");
  if (pos == nullptr) return Status::NotFound("missing tensor 'v.position_embd.weight'");
  const int64_t rows = pos->n_rows();
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(rows))));
  if (pos->shape.empty() || pos->shape[0] != e || side * side != rows || rows == 0) {
    return Status::InvalidArgument("tensor 'v.position_embd.weight' has shape " +
                                   ShapeString(pos->shape) + ", expected [" + std::to_string(e) +
                                   ", S*S] (a square grid of S x S rows)");
  }
  c.pos_grid = side;
  w.pos_side = side;
  MX_ASSIGN_OR_RETURN(w.pos_grid, b.Vec("v.position_embd.weight", {e, rows}));

  w.blocks.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    internal::BlockWeights& bw = w.blocks[static_cast<size_t>(i)];
    MX_ASSIGN_OR_RETURN(bw.ln1_w, b.Vec(Blk(i, "ln1.weight"), {e}));
    MX_ASSIGN_OR_RETURN(bw.ln1_b, b.Vec(Blk(i, "ln1.bias"), {e}));
    MX_ASSIGN_OR_RETURN(bw.qkv, b.Mat(Blk(i, "attn_qkv.weight"), {e, 3 * e}));
    MX_ASSIGN_OR_RETURN(bw.qkv_b, b.Vec(Blk(i, "attn_qkv.bias"), {3 * e}));
    MX_ASSIGN_OR_RETURN(bw.out, b.Mat(Blk(i, "attn_out.weight"), {e, e}));
    MX_ASSIGN_OR_RETURN(bw.out_b, b.Vec(Blk(i, "attn_out.bias"), {e}));
    MX_ASSIGN_OR_RETURN(bw.ln2_w, b.Vec(Blk(i, "ln2.weight"), {e}));
    MX_ASSIGN_OR_RETURN(bw.ln2_b, b.Vec(Blk(i, "ln2.bias"), {e}));
    MX_ASSIGN_OR_RETURN(bw.up, b.Mat(Blk(i, "ffn_up.weight"), {e, c.n_ff}));
    MX_ASSIGN_OR_RETURN(bw.up_b, b.Vec(Blk(i, "ffn_up.bias"), {c.n_ff}));
    MX_ASSIGN_OR_RETURN(bw.down, b.Mat(Blk(i, "ffn_down.weight"), {c.n_ff, e}));
    MX_ASSIGN_OR_RETURN(bw.down_b, b.Vec(Blk(i, "ffn_down.bias"), {e}));
  }
  MX_ASSIGN_OR_RETURN(w.post_ln_w, b.Vec("v.post_ln.weight", {e}));
  MX_ASSIGN_OR_RETURN(w.post_ln_b, b.Vec("v.post_ln.bias", {e}));
  MX_ASSIGN_OR_RETURN(w.mm0, b.Mat("mm.0.weight", {m4, m4}));
  MX_ASSIGN_OR_RETURN(w.mm0_b, b.Vec("mm.0.bias", {m4}));
  MX_ASSIGN_OR_RETURN(w.mm2, b.Mat("mm.2.weight", {m4, c.n_embd_out}));
  MX_ASSIGN_OR_RETURN(w.mm2_b, b.Vec("mm.2.bias", {c.n_embd_out}));
  *bytes = b.bytes();
  return Status::Ok();
}

}  // namespace

bool Projector::IsProjector(const gguf::GgufFile& f) {
  auto arch = f.GetString("general.architecture");
  return arch.ok() && *arch == "clip";
}

Result<std::unique_ptr<Projector>> Projector::Load(std::unique_ptr<gguf::GgufFile> f) {
  if (f == nullptr) return Status::InvalidArgument("Projector::Load: no file");
  const std::string path = f->path();
  auto config = ReadConfig(*f);
  if (!config.ok()) return config.status().WithContext(path);
  std::unique_ptr<Projector> proj(new Projector());
  proj->config_ = std::move(config).value();
  proj->weights_ = std::make_unique<internal::EncoderWeights>();
  Status s = BindWeights(*f, proj->config_, *proj->weights_, &proj->weight_bytes_);
  if (!s.ok()) return s.WithContext(path);
  proj->file_ = std::move(f);
  return proj;
}

Result<std::unique_ptr<Projector>> Projector::Open(Env* env, const std::string& path) {
  MX_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> f, gguf::GgufFile::Open(env, path));
  return Load(std::move(f));
}

Projector::~Projector() = default;

Status Projector::CheckMatchesModel(int64_t lm_n_embd) const {
  if (config_.n_embd_out == lm_n_embd) return Status::Ok();
  return Status::InvalidArgument("projector output width (clip.vision.projection_dim) is " +
                                 std::to_string(config_.n_embd_out) +
                                 " but the language model's n_embd is " +
                                 std::to_string(lm_n_embd));
}

Result<ImageEmbeddings> Projector::Encode(std::span<const float> pixels, int64_t width,
                                          int64_t height, ThreadPool* pool,
                                          const StageFn* on_stage) const {
  const int64_t f = config_.pixel_multiple(), p = config_.patch_size;
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width <= 0 || height <= 0) {
    return Status::InvalidArgument("picture size " + size + " is not positive");
  }
  if (width % f != 0 || height % f != 0) {
    return Status::InvalidArgument("picture size " + size + ": width and height must be " +
                                   "multiples of " + std::to_string(f) + " (patch size " +
                                   std::to_string(p) + " x merge " + std::to_string(config_.merge) +
                                   ")");
  }
  const int64_t npx = width / p, npy = height / p;
  if (npx > kMaxPatches || npy > kMaxPatches || npx * npy > kMaxPatches) {
    return Status::InvalidArgument("picture size " + size + " gives " + std::to_string(npx) + "x" +
                                   std::to_string(npy) + " patches, more than the limit of " +
                                   std::to_string(kMaxPatches));
  }
  const int n_threads = pool == nullptr ? 1 : pool->n_threads();
  const double bytes = internal::WorkspaceBytes(config_, npx * npy, n_threads);
  if (bytes > static_cast<double>(kMaxWorkspaceBytes)) {
    return Status::ResourceExhausted(
        "picture size " + size + " would need " + std::to_string(bytes / (1 << 20)) +
        " MiB of working memory with this projector, more than the limit of " +
        std::to_string(kMaxWorkspaceBytes >> 20) + " MiB");
  }
  const auto expected = static_cast<size_t>(3 * width * height);
  if (pixels.size() != expected) {
    return Status::InvalidArgument("picture size " + size + " needs " + std::to_string(expected) +
                                   " pixel values ([3][height][width]), got " +
                                   std::to_string(pixels.size()));
  }
  internal::Grid g{npx, npy};
  return internal::EncodeImage(config_, *weights_, pixels.data(), g, pool, on_stage);
}

}  // namespace mx::vision
