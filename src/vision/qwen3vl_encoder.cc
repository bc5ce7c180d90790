// The qwen3vl_merger vision encoder's forward pass (../shared/ref/README.md,
// "qwen35 vision", steps 5-9): patch embedding, position grid, ViT blocks,
// merger. Reads top to bottom like the graph llama.cpp builds; the
// per-token operations live in vision_ops.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "vision/vision_internal.h"

namespace mx::vision::internal {
namespace {

void Emit(const StageFn* on_stage, const std::string& name, const float* data, int64_t n) {
  if (on_stage != nullptr) (*on_stage)(name, std::span<const float>(data, static_cast<size_t>(n)));
}

// Columns [col, col + width) of n rows of stride ld, as a contiguous copy.
std::vector<float> Columns(const float* x, int64_t n, int64_t ld, int64_t col, int64_t width) {
  std::vector<float> out(static_cast<size_t>(n * width));
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(&out[static_cast<size_t>(t * width)], x + t * ld + col,
                static_cast<size_t>(width) * sizeof(float));
  }
  return out;
}

}  // namespace

void PatchEmbed(const EncoderWeights& w, int64_t patch, const float* pixels, Grid g,
                ThreadPool* pool, float* out) {
  const int64_t n = g.n(), e = w.patch0.n_rows, p = patch;
  const int64_t k = 3 * p * p;  // one patch, (channel, ky, kx)
  const int64_t width = g.npx * p, height = g.npy * p;
  // im2col in token order: row t = the pixels of token t's patch.
  std::vector<float> cols(static_cast<size_t>(n * k));
  ForChunks(pool, n, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t y0 = g.Row(t) * p, x0 = g.Col(t) * p;
      float* dst = &cols[static_cast<size_t>(t * k)];
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t ky = 0; ky < p; ++ky) {
          std::memcpy(dst + (c * p + ky) * p, pixels + (c * height + y0 + ky) * width + x0,
                      static_cast<size_t>(p) * sizeof(float));
        }
      }
    }
  });
  std::vector<float> frame1(static_cast<size_t>(n * e));
  const kernels::MatMulJob jobs[] = {{w.patch0, cols.data(), k, n, out, e},
                                     {w.patch1, cols.data(), k, n, frame1.data(), e}};
  kernels::MatMuls(jobs, pool);
  ForChunks(pool, n, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * e;
      const float* f1 = &frame1[static_cast<size_t>(t * e)];
      for (int64_t i = 0; i < e; ++i) {
        const float both = o[i] + f1[i];
        o[i] = both + w.patch_b[static_cast<size_t>(i)];
      }
    }
  });
}

std::vector<float> ResizePositionGrid(const float* grid, int64_t side, int64_t e, Grid g) {
  std::vector<float> out(static_cast<size_t>(g.n() * e), 0.0f);
  if (g.npx == side && g.npy == side) {
    std::memcpy(out.data(), grid, out.size() * sizeof(float));
    return out;
  }
  // ggml_interpolate (bilinear | antialias) over ne0 = columns, ne1 = rows.
  const float sf0 = static_cast<float>(g.npx) / static_cast<float>(side);
  const float sf1 = static_cast<float>(g.npy) / static_cast<float>(side);
  const float support0 = std::max(1.0f, 1.0f / sf0), invscale0 = 1.0f / support0;
  const float support1 = std::max(1.0f, 1.0f / sf1), invscale1 = 1.0f / support1;
  constexpr float kOffset = 0.5f;  // half-pixel centres
  auto triangle = [](float v) { return std::max(1.0f - std::fabs(v), 0.0f); };
  for (int64_t i1 = 0; i1 < g.npy; ++i1) {
    const float y = (static_cast<float>(i1) + kOffset) / sf1;
    const int64_t y_min = std::max<int64_t>(static_cast<int64_t>(y - support1 + kOffset), 0);
    const int64_t y_max = std::min<int64_t>(static_cast<int64_t>(y + support1 + kOffset), side);
    for (int64_t i0 = 0; i0 < g.npx; ++i0) {
      const float x = (static_cast<float>(i0) + kOffset) / sf0;
      const int64_t x_min = std::max<int64_t>(static_cast<int64_t>(x - support0 + kOffset), 0);
      const int64_t x_max = std::min<int64_t>(static_cast<int64_t>(x + support0 + kOffset), side);
      float* o = &out[static_cast<size_t>((i1 * g.npx + i0) * e)];
      float total = 0.0f;
      for (int64_t sy = y_min; sy < y_max; ++sy) {
        const float wy = triangle((static_cast<float>(sy) - y + kOffset) * invscale1);
        for (int64_t sx = x_min; sx < x_max; ++sx) {
          const float wx = triangle((static_cast<float>(sx) - x + kOffset) * invscale0);
          const float weight = wx * wy;
          if (weight <= 0.0f) continue;
          const float* src = grid + (sy * side + sx) * e;
          for (int64_t c = 0; c < e; ++c) {
            const float term = src[c] * weight;
            o[c] += term;
          }
          total += weight;
        }
      }
      if (total > 0.0f) {
        for (int64_t c = 0; c < e; ++c) o[c] /= total;
      }
    }
  }
  return out;
}

void AddPositions(const float* pos, Grid g, int64_t e, float* x) {
  for (int64_t t = 0; t < g.n(); ++t) {
    kernels::Add(pos + (g.Row(t) * g.npx + g.Col(t)) * e, e, x + t * e);
  }
}

double WorkspaceBytes(const ProjectorConfig& c, int64_t n_patches, int n_threads) {
  const double n = static_cast<double>(n_patches), e = static_cast<double>(c.n_embd);
  const double p = static_cast<double>(c.patch_size), d = static_cast<double>(c.head_dim());
  const double im2col = n * (3 * p * p + e);    // PatchEmbed: patches + frame 1
  const double stream = n * e * 3 + n * 3 * e;  // x, h, att + qkv
  const double ff = n * std::max(static_cast<double>(c.n_ff), 4 * e);
  const double attention = 2 * n * e + n_threads * (32 * (n + d + 16) * 2 + 64 * (d + 16));
  const double out = n / 4 * static_cast<double>(c.n_embd_out);
  return sizeof(float) * (std::max(im2col, attention) + stream + ff + out + n * e /* pos */);
}

ImageEmbeddings EncodeImage(const ProjectorConfig& c, const EncoderWeights& w, const float* pixels,
                            Grid g, ThreadPool* pool, const StageFn* on_stage) {
  const int64_t n = g.n(), e = c.n_embd, d = c.head_dim(), n_ff = c.n_ff;
  const int64_t e4 = 4 * e, n_merged = n / 4;

  // Step 5-6: patch embeddings, tokens in 2x2-block order.
  std::vector<float> x(static_cast<size_t>(n * e));  // [N][E] residual stream
  PatchEmbed(w, c.patch_size, pixels, g, pool, x.data());
  Emit(on_stage, "patch_bias", x.data(), n * e);

  // Step 7: the position grid resized to the patch grid, added in token order.
  const std::vector<float> pos = ResizePositionGrid(w.pos_grid.data(), w.pos_side, e, g);
  if (on_stage != nullptr) {
    std::vector<float> planar(pos.size());  // llama.cpp's layout: [E][npy][npx]
    for (int64_t r = 0; r < g.n(); ++r) {
      for (int64_t i = 0; i < e; ++i) planar[static_cast<size_t>(i * n + r)] = pos[r * e + i];
    }
    Emit(on_stage, "pos_embd_interp", planar.data(), n * e);
  }
  AddPositions(pos.data(), g, e, x.data());
  Emit(on_stage, "inp_pos_emb", x.data(), n * e);

  // Step 8: the ViT blocks.
  std::vector<float> h(static_cast<size_t>(n * e));        // [N][E]
  std::vector<float> qkv(static_cast<size_t>(n * 3 * e));  // [N][q | k | v]
  std::vector<float> att(static_cast<size_t>(n * e));      // [N][E]
  std::vector<float> ff(static_cast<size_t>(n * std::max(n_ff, e4)));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const BlockWeights& b = w.blocks[static_cast<size_t>(il)];
    const std::string sfx = "-" + std::to_string(il);
    LayerNorm(x.data(), n, e, b.ln1_w.data(), b.ln1_b.data(), c.eps, h.data(), pool);
    Emit(on_stage, "ln1" + sfx, h.data(), n * e);

    Linear(b.qkv, b.qkv_b, h.data(), n, qkv.data(), pool);
    float* q = qkv.data();
    float* k = q + e;
    const float* v = q + 2 * e;
    RopeVision(q, 3 * e, g, c.n_head, d, pool);
    RopeVision(k, 3 * e, g, c.n_head, d, pool);
    if (on_stage != nullptr) {
      Emit(on_stage, "Qcur_rope" + sfx, Columns(q, n, 3 * e, 0, e).data(), n * e);
      Emit(on_stage, "Kcur_rope" + sfx, Columns(k, n, 3 * e, 0, e).data(), n * e);
    }
    Attention(q, k, v, 3 * e, n, c.n_head, d, att.data(), e, pool);
    Emit(on_stage, "kqv_out" + sfx, att.data(), n * e);
    Linear(b.out, b.out_b, att.data(), n, h.data(), pool);
    Emit(on_stage, "attn_out" + sfx, h.data(), n * e);
    AddTo(h.data(), n * e, x.data(), pool);
    Emit(on_stage, "ffn_inp" + sfx, x.data(), n * e);

    LayerNorm(x.data(), n, e, b.ln2_w.data(), b.ln2_b.data(), c.eps, h.data(), pool);
    Emit(on_stage, "ffn_inp_normed" + sfx, h.data(), n * e);
    Linear(b.up, b.up_b, h.data(), n, ff.data(), pool);
    if (c.gelu) {
      Gelu(ff.data(), n * n_ff, pool);
    } else {
      GeluQuick(ff.data(), n * n_ff, pool);
    }
    Emit(on_stage, "ffn_gelu" + sfx, ff.data(), n * n_ff);
    Linear(b.down, b.down_b, ff.data(), n, h.data(), pool);
    Emit(on_stage, "ffn_out" + sfx, h.data(), n * e);
    AddTo(h.data(), n * e, x.data(), pool);
    Emit(on_stage, "layer_out" + sfx, x.data(), n * e);
  }

  // Step 9: the merger. Four consecutive tokens are one 2x2 block, so the
  // normed stream read as [N/4][4E] is the concatenation.
  LayerNorm(x.data(), n, e, w.post_ln_w.data(), w.post_ln_b.data(), c.eps, h.data(), pool);
  Emit(on_stage, "norm_b-" + std::to_string(c.n_layer), h.data(), n * e);
  Linear(w.mm0, w.mm0_b, h.data(), n_merged, ff.data(), pool);
  Gelu(ff.data(), n_merged * e4, pool);  // GELU here whatever clip.use_gelu says
  Emit(on_stage, "ffn_gelu", ff.data(), n_merged * e4);

  ImageEmbeddings out;
  out.nx = g.npx / 2;
  out.ny = g.npy / 2;
  out.data.resize(static_cast<size_t>(n_merged * c.n_embd_out));
  Linear(w.mm2, w.mm2_b, ff.data(), n_merged, out.data.data(), pool);
  // Merged tokens come out in block raster order: block (Y, X) is row Y * nx + X.
  return out;
}

}  // namespace mx::vision::internal
