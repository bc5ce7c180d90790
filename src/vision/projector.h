// A vision projector: the "mmproj" GGUF (general.architecture = "clip") that
// llama.cpp's libmtmd loads beside a multimodal language model, holding the
// vision tower and the projector into the LM's embedding space. Projector
// loads and validates one and encodes preprocessed pictures into LM input
// embeddings exactly as libmtmd does.
//
// Supported: projector type qwen3vl_merger without deepstack layers (Qwen
// 3.5's vision tower; ../shared/ref/README.md "qwen35 vision", steps 5-9):
// patch embedding with both temporal kernels, learned position grid resized
// with an antialiased half-pixel bilinear filter, LayerNorm ViT blocks with a
// fused biased qkv, 2-D vision RoPE and full bidirectional attention, then a
// LayerNorm + 2x2-concat + fc1 + GELU + fc2 merger.
//
// GELU: llama.cpp's CPU backend evaluates it through a float16 table,
// y = f16(gelu_tanh(f16(x))) for |x| < 10 (x above, 0 below); this engine
// does the same (not the exact GELU), so it matches llama.cpp to float16
// ulps instead of to the table's 2e-3. The ViT FFN uses gelu_quick (also the
// float16 table) when clip.use_gelu is false or absent, as llama.cpp does;
// the merger always uses GELU.
//
// Weights may be F32, F16, BF16 or any type kernels::MatMul takes (Q8_0, ...);
// activations stay f32 (llama.cpp rounds activations to f16 for F16 weights,
// so F16 files match it less tightly than F32 ones).
//
// Thread-safety: immutable after Load(); Encode() may run concurrently on
// different pools.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/gguf_file.h"

namespace mx::vision {

namespace internal {
struct EncoderWeights;
}

// The projector's hyperparameters, from the clip.* keys and tensor shapes.
struct ProjectorConfig {
  std::string projector_type;         // clip.projector_type: "qwen3vl_merger"
  int64_t patch_size = 0;             // p: a patch is p x p pixels (16)
  int64_t merge = 0;                  // merge x merge patches per LM token (2)
  int64_t n_embd = 0;                 // E: ViT width
  int64_t n_head = 0;                 // attention heads of the ViT
  int64_t n_ff = 0;                   // ViT FFN width
  int64_t n_layer = 0;                // ViT blocks
  int64_t n_embd_out = 0;             // clip.vision.projection_dim = the LM's n_embd
  int64_t pos_grid = 0;               // S: the learned position grid is S x S
  int64_t image_size = 0;             // clip.vision.image_size (not used by this projector)
  float eps = 0.0f;                   // LayerNorm epsilon
  bool gelu = false;                  // clip.use_gelu: ViT FFN GELU (else gelu_quick)
  std::array<float, 3> image_mean{};  // per channel R, G, B
  std::array<float, 3> image_std{};

  int64_t head_dim() const { return n_head > 0 ? n_embd / n_head : 0; }
  // A picture's width and height must be multiples of this (p * merge = 32).
  int64_t pixel_multiple() const { return patch_size * merge; }
};

// Encoded picture: nx x ny merged tokens, [ny * nx][n_embd_out] floats, row
// i = merged-grid cell (row i / nx, column i % nx).
struct ImageEmbeddings {
  int64_t nx = 0;
  int64_t ny = 0;
  std::vector<float> data;
};

// Test hook: called with each intermediate tensor under llama.cpp's graph
// name ("patch_bias", "pos_embd_interp", "inp_pos_emb", "ln1-0",
// "Qcur_rope-0", ..., "layer_out-2", "norm_b-3", "ffn_gelu") in llama.cpp's
// layout (ref-tiny-qwen35-vision.json, images.*.stages): tokens in 2x2-block
// order; pos_embd_interp as [E][npy][npx]. The span lives for the call only.
using StageFn = std::function<void(std::string_view name, std::span<const float> data)>;

// Most patches (ViT tokens) one picture may have: 16384 = 4096 LM tokens,
// llama.cpp's default image_max_tokens for Qwen-VL.
inline constexpr int64_t kMaxPatches = 16384;
// Most working memory one Encode may take (activations of all steps). A real
// Qwen 3.5 vision tower needs about 0.7 GiB at kMaxPatches; the cap only stops
// a hostile file's huge sizes from turning into a huge allocation.
inline constexpr uint64_t kMaxWorkspaceBytes = uint64_t{4} << 30;

class Projector {
 public:
  // True when `f` is a projector (general.architecture == "clip"). Cheap:
  // reads one key. Used when scanning a models folder.
  static bool IsProjector(const gguf::GgufFile& f);

  // Loads a projector from a parsed GGUF and validates it: projector type
  // (qwen3vl_merger only; others NotSupported naming the type), the clip.*
  // keys (NotFound when absent, InvalidArgument expected vs. actual), every
  // tensor's presence, shape and type (NotFound / InvalidArgument /
  // NotSupported naming the tensor), deepstack tensors (NotSupported). Every
  // message starts with the file's path. Takes ownership of `f`; the
  // projector's matrices point into its mapping.
  static Result<std::unique_ptr<Projector>> Load(std::unique_ptr<gguf::GgufFile> f);
  // GgufFile::Open, then Load.
  static Result<std::unique_ptr<Projector>> Open(Env* env, const std::string& path);

  ~Projector();
  Projector(const Projector&) = delete;
  Projector& operator=(const Projector&) = delete;

  const ProjectorConfig& config() const { return config_; }
  const std::string& path() const { return file_->path(); }
  // Bytes of all weights as stored in the file.
  uint64_t weight_bytes() const { return weight_bytes_; }

  // OK when this projector's output width equals the language model's
  // n_embd; else InvalidArgument naming both (libmtmd refuses such a pair).
  // The caller adds the file names.
  Status CheckMatchesModel(int64_t lm_n_embd) const;

  // Encodes one preprocessed picture: pixels planar [3][height][width]
  // (normalised with image_mean / image_std), width and height multiples of
  // config().pixel_multiple(). Returns nx = width / 32, ny = height / 32 (for
  // p = 16, merge = 2) and nx * ny rows of n_embd_out floats. Runs on `pool`
  // (null: the caller's thread); the result is bit-identical for any thread
  // count. InvalidArgument when the sizes are zero, negative, not multiples,
  // over kMaxPatches patches, or pixels.size() != 3 * width * height;
  // ResourceExhausted when the encode would need more than kMaxWorkspaceBytes.
  // on_stage (may be null) receives the intermediate tensors.
  Result<ImageEmbeddings> Encode(std::span<const float> pixels, int64_t width, int64_t height,
                                 ThreadPool* pool, const StageFn* on_stage = nullptr) const;

  // The bound weights, for the stage tests (vision_internal.h).
  const internal::EncoderWeights& weights() const { return *weights_; }

 private:
  Projector() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  ProjectorConfig config_;
  std::unique_ptr<internal::EncoderWeights> weights_;
  uint64_t weight_bytes_ = 0;
};

}  // namespace mx::vision
