// Synthetic vision projectors ("mmproj" GGUF files) for Qwen 3.5 models, with
// deterministic pseudo-random weights, in the layout llama.cpp's converter
// writes for Qwen3_5ForConditionalGeneration and libmtmd reads
// (../shared/ref/README.md, "qwen35 vision", "The mmproj file"):
// general.architecture "clip", general.type "mmproj", projector type
// "qwen3vl_merger" without deepstack layers, a ViT of `n_block` pre-norm
// blocks (LayerNorm, fused qkv with bias, GELU FFN), a learned position grid,
// the Conv3D patch embedding stored as two Conv2D kernels (`v.patch_embd.weight`
// for frame 0, `v.patch_embd.weight.1` for frame 1) and the merger
// (`v.post_ln`, 2x2 concat, `mm.0`, GELU, `mm.2`).
//
// Weights follow the reference's recipe: matrices N(0, 1/fan_in), each patch
// kernel N(0, 1/(3 p^2)), patch bias std 0.2, position grid std 0.5, norm
// weights 1 + 0.1 N(0, 1), norm biases std 0.1, qkv bias std 0.2, other
// biases std 0.1. Every tensor draws from its own stream seeded by (seed,
// tensor name), so the same spec always writes the same bytes.
//
// Tensor types are the converter's: norms, biases and the position grid F32;
// the patch kernels F16 in an F16 file and F32 otherwise; the other matrices
// in `weight_type`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"

namespace mx::models {

struct SyntheticProjectorSpec {
  std::string name = "synthetic-mmproj";  // general.name
  int64_t patch_size = 16;                // p: pixels per patch side
  int64_t spatial_merge = 2;              // patches per LM token side (llama.cpp: 2 only)
  int64_t n_embd = 64;                    // E: ViT width
  int64_t n_head = 4;                     // heads of E / n_head dims (a multiple of 4)
  int64_t n_ff = 176;                     // ViT FFN width
  int64_t n_block = 3;                    // ViT blocks
  int64_t pos_grid = 6;                   // S: learned position grid of S x S rows
  int64_t projection_dim = 128;           // merger output = the LM's n_embd
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};
  float layer_norm_eps = 1e-6f;
  DType weight_type = DType::kF32;  // F32, F16 or Q8_0 (rows a multiple of 32)
  uint64_t seed = 1;
};

// The projector of an LM preset (models/synthetic_model.h): "tiny-qwen35" (the
// shape and metadata of ref/tiny-qwen35-mmproj, F32) and "qwen3.5-0.8b" (the
// real Qwen3.5-0.8B vision tower: 12 blocks, E 768, 12 heads, FFN 3072, a
// 48 x 48 grid, projection 1024, mean/std 0.5, F16). InvalidArgument naming
// the presets that have one otherwise.
Result<SyntheticProjectorSpec> SyntheticProjectorPreset(std::string_view preset);
std::vector<std::string> SyntheticProjectorPresetNames();

// Checks the spec: sizes in range, heads dividing E into heads whose width is
// a multiple of 4 (the 2-D RoPE), spatial_merge 2, std > 0 and the weight type
// one of F32/F16/Q8_0 with every matrix row a multiple of its block. Errors
// name the field and expected vs. actual.
Status ValidateSyntheticProjectorSpec(const SyntheticProjectorSpec& spec);

// The file's tensors in write order: name, type and ggml shape ([ne0, ne1, ...]).
struct ProjectorTensor {
  std::string name;
  DType type;
  std::vector<int64_t> shape;
};
std::vector<ProjectorTensor> SyntheticProjectorTensors(const SyntheticProjectorSpec& spec);

// Validates `spec` and writes the projector to `path` atomically (tmp, fsync,
// rename). progress(done, total) in values written.
Status WriteSyntheticProjector(Env* env, const SyntheticProjectorSpec& spec,
                               const std::string& path,
                               const std::function<void(uint64_t, uint64_t)>& progress = {});

// Where the projector of the model at `model_path` goes by default:
// "dir/NAME.gguf" -> "dir/NAME.mmproj.gguf" (a path without ".gguf" gets
// ".mmproj.gguf" appended). The server pairs NAME.gguf with NAME.mmproj.gguf
// or mmproj-NAME.gguf beside it.
std::string DefaultProjectorPath(const std::string& model_path);

}  // namespace mx::models
