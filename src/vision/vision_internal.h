// The steps of the qwen3vl_merger vision encoder (../shared/ref/README.md,
// "qwen35 vision", steps 5-9), one function per step so that tests can feed
// each step llama.cpp's recorded tensor of the step before. Projector::Encode
// composes them (qwen3vl_encoder.cc). Internal to src/vision/ and its tests.
//
// Notation: p = patch size, E = ViT width, d = head dim, N = patches = ViT
// tokens. Token order is the 2x2-block order of step 6 everywhere: token
// k = 4 * (Y * npx / 2 + X) + 2 * dy + dx is the patch at row 2Y + dy,
// column 2X + dx.
//
// Every function computes each output element in one fixed order, whatever
// the pool size or how the work is split, so results are bit-identical with
// any number of threads. pool may be null (runs on the caller).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "vision/projector.h"

namespace mx::vision::internal {

// Weights of one ViT block. Matrices point into the mapped GGUF file.
struct BlockWeights {
  std::vector<float> ln1_w, ln1_b;  // [E]
  kernels::Matrix qkv;              // [3E][E]: output rows q 0..E-1 | k | v
  std::vector<float> qkv_b;         // [3E]
  kernels::Matrix out;              // [E][E] (attn_out)
  std::vector<float> out_b;         // [E]
  std::vector<float> ln2_w, ln2_b;  // [E]
  kernels::Matrix up;               // [n_ff][E]
  std::vector<float> up_b;          // [n_ff]
  kernels::Matrix down;             // [E][n_ff]
  std::vector<float> down_b;        // [E]
};

struct EncoderWeights {
  // The two frames of Qwen's Conv3D as two Conv2D kernels, each [E][3 p p]
  // with a row laid out (channel, ky, kx): element c * p * p + ky * p + kx.
  kernels::Matrix patch0, patch1;
  std::vector<float> patch_b;               // [E]
  std::vector<float> pos_grid;              // [S * S][E]: grid row r, column c at r * S + c
  int64_t pos_side = 0;                     // S
  std::vector<BlockWeights> blocks;         // [n_layer]
  std::vector<float> post_ln_w, post_ln_b;  // [E] (the merger's norm)
  kernels::Matrix mm0;                      // [4E][4E] (merger fc1)
  std::vector<float> mm0_b;                 // [4E]
  kernels::Matrix mm2;                      // [n_embd_out][4E] (merger fc2)
  std::vector<float> mm2_b;                 // [n_embd_out]
};

// The patch grid of one picture. REQUIRES: npx, npy even and positive.
struct Grid {
  int64_t npx = 0, npy = 0;  // patches per row, per column
  int64_t n() const { return npx * npy; }
  // Patch row / column of token t (step 6).
  int64_t Row(int64_t t) const { return 2 * ((t / 4) / (npx / 2)) + (t % 4) / 2; }
  int64_t Col(int64_t t) const { return 2 * ((t / 4) % (npx / 2)) + t % 2; }
};

// fn(begin, end) for consecutive ranges of at most `chunk` items covering
// [0, n), on the pool when there is one (null: the caller's thread).
void ForChunks(ThreadPool* pool, int64_t n, int64_t chunk,
               const std::function<void(int64_t, int64_t)>& fn);

// y[i] += x[i] for i < n, split over the pool.
void AddTo(const float* x, int64_t n, float* y, ThreadPool* pool);

// Step 5 + 6: out[t] = conv(W0, img) + conv(W1, img) + b at token t's patch.
// pixels: planar [3][npy * p][npx * p]; out: [N][E].
void PatchEmbed(const EncoderWeights& w, int64_t patch, const float* pixels, Grid g,
                ThreadPool* pool, float* out);

// Step 7: the learned S x S grid resized to npy x npx with ggml's antialiased
// bilinear filter (half-pixel centres, triangle of width max(1, 1/scale) per
// axis, each output a weight-normalised sum over its 2-D support), or copied
// as is when the grid already has that size. Returns [npy * npx][E] in raster
// order (patch row r, column c at r * npx + c), not token order.
std::vector<float> ResizePositionGrid(const float* grid, int64_t side, int64_t e, Grid g);

// Step 7, second half: x[t] += pos[patch of t]. pos in raster order.
void AddPositions(const float* pos, Grid g, int64_t e, float* x);

// out[t] = (x[t] - mean) / sqrt(var + eps) * w + b per token (biased
// variance; sums in double as ggml_norm). out may alias x.
void LayerNorm(const float* x, int64_t n, int64_t e, const float* w, const float* b, float eps,
               float* out, ThreadPool* pool);

// y[t] = W x[t] + b: kernels::MatMul, then the bias. x: [n][W.n_cols], y:
// [n][W.n_rows].
void Linear(const kernels::Matrix& w, const std::vector<float>& b, const float* x, int64_t n,
            float* y, ThreadPool* pool);

// Step 8's 2-D "vision" RoPE, in place on the n_head heads of d values that
// start at x + t * ld for each token t: pair k < d/2 is (z_k, z_{k+d/2})
// rotated by r * 10000^(-4k/d) for k < d/4 and c * 10000^(-4(k-d/4)/d)
// above, (r, c) = token t's patch row and column; angles built iteratively in
// f32 as ggml builds them. REQUIRES: d % 4 == 0.
void RopeVision(float* x, int64_t ld, Grid g, int64_t n_head, int64_t d, ThreadPool* pool);

// Step 8's attention over all n tokens (bidirectional, no mask): for head h,
// out[t][h] = softmax_j(q[t][h] . k[j][h] / sqrt(d)) v[j][h]. q, k, v: rows
// of n_head * d values at stride ld; out: rows at stride ldo. Parallel over
// (query tile, head) tasks through kernels::AttentionRows, whose result for a
// query does not depend on the tiling; one scratch buffer per thread.
void Attention(const float* q, const float* k, const float* v, int64_t ld, int64_t n,
               int64_t n_head, int64_t d, float* out, int64_t ldo, ThreadPool* pool);

// x = gelu(x) as llama.cpp's CPU backend computes it: through a float16
// table of the tanh approximation, y = f16(gelu_tanh(f16(x))) for
// -10 < x < 10, y = x for x >= 10, y = 0 for x <= -10.
void Gelu(float* x, int64_t n, ThreadPool* pool);
// x = gelu_quick(x) = x * sigmoid(1.702 x), through llama.cpp's float16
// table for every x: y = f16(gelu_quick(f16(x))).
void GeluQuick(float* x, int64_t n, ThreadPool* pool);
// The table entries themselves, for tests: f16 bits in, f16 bits out.
uint16_t GeluF16(uint16_t x);
uint16_t GeluQuickF16(uint16_t x);

// Bytes of working memory EncodeImage takes for a picture of n_patches
// patches on n_threads threads (an upper bound, computed in double so that
// hostile sizes cannot overflow).
double WorkspaceBytes(const ProjectorConfig& c, int64_t n_patches, int n_threads);

// Steps 5-9 for one picture (Projector::Encode after its checks).
// REQUIRES: pixels holds 3 * (npy * p) * (npx * p) values; g.n() <= kMaxPatches.
ImageEmbeddings EncodeImage(const ProjectorConfig& c, const EncoderWeights& w, const float* pixels,
                            Grid g, ThreadPool* pool, const StageFn* on_stage);

}  // namespace mx::vision::internal
