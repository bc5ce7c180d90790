// The per-token operations of the vision encoder: LayerNorm, linear layers,
// 2-D vision RoPE, full attention and llama.cpp's float16-table GELUs
// (vision_internal.h). Built with -ffp-contract=off: each product and sum
// rounds as written, as in ggml's scalar code.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "core/fp16.h"
#include "vision/vision_internal.h"

namespace mx::vision::internal {
namespace {

// fn(task, thread) for every task, on the pool when there is one.
void ForEach(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int)>& fn) {
  if (pool == nullptr || pool->n_threads() <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  pool->ParallelFor(n, fn);
}

int Threads(ThreadPool* pool) { return pool == nullptr ? 1 : pool->n_threads(); }

// ggml's scalar GELU (tanh approximation) and gelu_quick, in f32.
float GeluTanhF32(float x) {
  constexpr float kGeluCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
}
float GeluQuickF32(float x) {
  constexpr float kGeluQuickCoef = -1.702f;
  return x * (1.0f / (1.0f + std::exp(kGeluQuickCoef * x)));
}

// f16 bits -> the table's output widened to f32 (65536 entries).
struct F16Table {
  std::unique_ptr<float[]> value;
  explicit F16Table(float (*fn)(float)) : value(new float[65536]) {
    for (uint32_t i = 0; i < 65536; ++i) {
      value[i] = Fp16ToF32(F32ToFp16(fn(Fp16ToF32(static_cast<uint16_t>(i)))));
    }
  }
};
const F16Table& GeluTable() {
  static const F16Table table(GeluTanhF32);
  return table;
}
const F16Table& GeluQuickTable() {
  static const F16Table table(GeluQuickF32);
  return table;
}

// Applies a table to x in chunks: each task rounds its chunk to f16 with the
// kernels' converter (round to nearest even) and looks every value up.
template <bool kClamp>
void ApplyTable(const F16Table& table, float* x, int64_t n, ThreadPool* pool) {
  constexpr int64_t kChunk = 2048;
  ForChunks(pool, n, kChunk, [&](int64_t i0, int64_t i1) {
    uint16_t h[kChunk];
    float* v = x + i0;
    const int64_t len = i1 - i0;
    kernels::StoreKvRow(DType::kF16, v, len, reinterpret_cast<uint8_t*>(h));
    for (int64_t i = 0; i < len; ++i) {
      if (kClamp && v[i] <= -10.0f) {
        v[i] = 0.0f;
      } else if (kClamp && v[i] >= 10.0f) {
        // y = x
      } else {
        v[i] = table.value[h[i]];
      }
    }
  });
}

}  // namespace

void ForChunks(ThreadPool* pool, int64_t n, int64_t chunk,
               const std::function<void(int64_t, int64_t)>& fn) {
  ForEach(pool, (n + chunk - 1) / chunk,
          [&](int64_t task, int) { fn(task * chunk, std::min(n, (task + 1) * chunk)); });
}

void AddTo(const float* x, int64_t n, float* y, ThreadPool* pool) {
  ForChunks(pool, n, 1 << 14,
            [&](int64_t i0, int64_t i1) { kernels::Add(x + i0, i1 - i0, y + i0); });
}

void LayerNorm(const float* x, int64_t n, int64_t e, const float* w, const float* b, float eps,
               float* out, ThreadPool* pool) {
  ForChunks(pool, n, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * e;
      float* yt = out + t * e;
      double sum = 0.0;
      for (int64_t i = 0; i < e; ++i) sum += xt[i];
      const auto mean = static_cast<float>(sum / static_cast<double>(e));
      double sum2 = 0.0;
      for (int64_t i = 0; i < e; ++i) {
        const float y = xt[i] - mean;
        yt[i] = y;
        sum2 += static_cast<double>(y * y);
      }
      const auto var = static_cast<float>(sum2 / static_cast<double>(e));
      const float scale = 1.0f / std::sqrt(var + eps);
      for (int64_t i = 0; i < e; ++i) {
        const float normed = yt[i] * scale;
        const float weighted = normed * w[i];
        yt[i] = weighted + b[i];
      }
    }
  });
}

void Linear(const kernels::Matrix& w, const std::vector<float>& b, const float* x, int64_t n,
            float* y, ThreadPool* pool) {
  kernels::MatMul(w, x, w.n_cols, n, y, w.n_rows, pool);
  ForChunks(pool, n, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) kernels::Add(b.data(), w.n_rows, y + t * w.n_rows);
  });
}

void RopeVision(float* x, int64_t ld, Grid g, int64_t n_head, int64_t d, ThreadPool* pool) {
  const int64_t half = d / 2, quarter = d / 4;
  const float theta_scale = std::pow(10000.0f, -2.0f / static_cast<float>(half));
  // cos/sin of pair k for every patch row (k < d/4) and column (d/4 <= k < d/2),
  // each section's angle starting at the position and multiplied by
  // theta_scale once per pair, in f32.
  auto table = [&](int64_t n_pos) {
    std::vector<float> cs(static_cast<size_t>(n_pos * quarter * 2));
    for (int64_t p = 0; p < n_pos; ++p) {
      float theta = static_cast<float>(p);
      for (int64_t k = 0; k < quarter; ++k) {
        cs[static_cast<size_t>((p * quarter + k) * 2)] = std::cos(theta);
        cs[static_cast<size_t>((p * quarter + k) * 2 + 1)] = std::sin(theta);
        theta *= theta_scale;
      }
    }
    return cs;
  };
  const std::vector<float> by_row = table(g.npy), by_col = table(g.npx);
  ForChunks(pool, g.n(), 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* cs_r = &by_row[static_cast<size_t>(g.Row(t) * quarter * 2)];
      const float* cs_c = &by_col[static_cast<size_t>(g.Col(t) * quarter * 2)];
      for (int64_t h = 0; h < n_head; ++h) {
        float* z = x + t * ld + h * d;
        for (int64_t k = 0; k < half; ++k) {
          const float* cs = k < quarter ? cs_r + 2 * k : cs_c + 2 * (k - quarter);
          const float x0 = z[k], x1 = z[k + half];
          z[k] = x0 * cs[0] - x1 * cs[1];
          z[k + half] = x0 * cs[1] + x1 * cs[0];
        }
      }
    }
  });
}

void Attention(const float* q, const float* k, const float* v, int64_t ld, int64_t n,
               int64_t n_head, int64_t d, float* out, int64_t ldo, ThreadPool* pool) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // K and V of each head packed contiguously ([n_head][n][d]): the kernel
  // then streams a head's keys from consecutive memory instead of gathering
  // d floats every ld, and the head-major tasks below reuse them from cache.
  std::vector<float> kh(static_cast<size_t>(n_head * n * d)), vh(kh.size());
  ForEach(pool, n_head, [&](int64_t h, int) {
    for (int64_t t = 0; t < n; ++t) {
      const size_t dst = static_cast<size_t>((h * n + t) * d);
      std::memcpy(&kh[dst], k + t * ld + h * d, static_cast<size_t>(d) * sizeof(float));
      std::memcpy(&vh[dst], v + t * ld + h * d, static_cast<size_t>(d) * sizeof(float));
    }
  });
  const int64_t tile = kernels::kAttentionRowTile;
  const int64_t n_tiles = (n + tile - 1) / tile;
  const int64_t scratch_floats = kernels::AttentionScratchFloats(n, d);
  std::vector<float> scratch(static_cast<size_t>(scratch_floats * Threads(pool)));
  const std::vector<int64_t> n_pos(static_cast<size_t>(std::min(n, tile)), n);
  ForEach(pool, n_head * n_tiles, [&](int64_t task, int thread) {
    const int64_t h = task / n_tiles, t0 = (task % n_tiles) * tile;
    kernels::KvView kv;
    kv.k_type = kv.v_type = DType::kF32;
    kv.k = reinterpret_cast<const uint8_t*>(&kh[static_cast<size_t>(h * n * d)]);
    kv.v = reinterpret_cast<const uint8_t*>(&vh[static_cast<size_t>(h * n * d)]);
    kv.k_row_bytes = kv.v_row_bytes = static_cast<size_t>(d) * sizeof(float);
    kv.n_kv_head = 1;
    kv.head_dim = static_cast<int>(d);
    kernels::AttentionRows(q + t0 * ld + h * d, ld, std::min(tile, n - t0), 1, kv, n_pos.data(),
                           scale, out + t0 * ldo + h * d, ldo,
                           &scratch[static_cast<size_t>(thread * scratch_floats)]);
  });
}

void Gelu(float* x, int64_t n, ThreadPool* pool) { ApplyTable<true>(GeluTable(), x, n, pool); }

void GeluQuick(float* x, int64_t n, ThreadPool* pool) {
  ApplyTable<false>(GeluQuickTable(), x, n, pool);
}

uint16_t GeluF16(uint16_t x) { return F32ToFp16(GeluTable().value[x]); }
uint16_t GeluQuickF16(uint16_t x) { return F32ToFp16(GeluQuickTable().value[x]); }

}  // namespace mx::vision::internal
