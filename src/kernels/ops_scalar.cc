// The scalar path: plain C++ (libm expf), the reference the SIMD paths are
// tested against, and the fallback on CPUs without AVX2.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/qdot_blocks.h"

namespace mx::kernels::internal {
namespace {

// Dot product in a fixed order: 8 interleaved partial sums (lane j takes
// k = j mod 8), then a fixed pairwise combination.
float Dot(const float* w, const float* x, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += w[k + j] * x[k + j];
  }
  for (int j = 0; k + j < n; ++j) acc[j] += w[k + j] * x[k + j];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

bool Gemm(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
          const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  if (type != DType::kF32) return false;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* row = reinterpret_cast<const float*>(w + static_cast<size_t>(r) * row_bytes);
      y[t * ldy + r] = Dot(row, x + t * ldx, n_cols);
    }
  }
  return true;
}

bool Dequant(DType, const uint8_t*, float*, int64_t) { return false; }

struct ScalarHalf {
  static float Half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return Fp16ToF32(h);
  }
};
void QGemm(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
           const Q8KBlock* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  QGemmPortable<Q8KBlock, QDotRow<ScalarHalf>>(type, w, row_bytes, n_rows, n_blocks, a, lda,
                                               n_tokens, y, ldy);
}
void QGemm32(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_blocks,
             const Q8Block32* a, int64_t lda, int64_t n_tokens, float* y, int64_t ldy) {
  QGemmPortable<Q8Block32, QDotRow32<ScalarHalf>>(type, w, row_bytes, n_rows, n_blocks, a, lda,
                                                  n_tokens, y, ldy);
}

void F32ToF16Row(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = F32ToFp16(src[i]);
    std::memcpy(dst + i, &h, 2);
  }
}
void F16ToF32Row(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + i, 2);
    dst[i] = Fp16ToF32(h);
  }
}

double SumSquares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

float MaxValue(const float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;  // NaN compares false
  return max;
}

double SumExp(const float* x, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(x[i])) sum += std::exp(static_cast<double>(x[i]) - shift);
  }
  return sum;
}

void ScaleMul(const float* x, const float* w, float scale, int64_t n, float* out) {
  if (w == nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * w[i];
  }
}

inline float SiluOne(float v) { return v / (1.0f + std::exp(-v)); }

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = SiluOne(gate[i]) * up[i];
}
void Silu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = SiluOne(x[i]);
}

// One head's slice (at byte `offset` of row p of K or V) as f32 in `tmp`.
const float* KvSlice(DType type, const uint8_t* base, size_t row_bytes, int64_t p, size_t offset,
                     int hd, float* tmp) {
  const uint8_t* src = base + static_cast<size_t>(p) * row_bytes + offset;
  switch (type) {
    case DType::kF16:
      F16ToF32Row(reinterpret_cast<const uint16_t*>(src), hd, tmp);
      break;
    case DType::kQ8_0:
    case DType::kQ4_0:
      DequantizeRowRef(type, src, tmp, hd);
      break;
    default:
      std::memcpy(tmp, src, static_cast<size_t>(hd) * 4);
      break;
  }
  return tmp;
}

void AttentionOne(const float* q, int n_head, const KvView& kv, int64_t n_pos, float scale,
                  float* out, float* scratch) {
  const int hd = kv.head_dim;
  const int group = kv.n_kv_head > 0 && n_head >= kv.n_kv_head ? n_head / kv.n_kv_head : 1;
  const size_t k_head = RowBytes(kv.k_type, hd), v_head = RowBytes(kv.v_type, hd);
  std::vector<float> row(static_cast<size_t>(hd));
  for (int h = 0; h < n_head; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * hd;
    float* oh = out + static_cast<int64_t>(h) * hd;
    for (int d = 0; d < hd; ++d) oh[d] = 0.0f;
    if (n_pos <= 0) continue;
    const size_t k_off = static_cast<size_t>(h / group) * k_head;
    const size_t v_off = static_cast<size_t>(h / group) * v_head;
    float max = -INFINITY;
    for (int64_t p = 0; p < n_pos; ++p) {
      const float* k = KvSlice(kv.k_type, kv.k, kv.k_row_bytes, p, k_off, hd, row.data());
      scratch[p] = Dot(qh, k, hd) * scale;
      max = std::fmax(max, scratch[p]);
    }
    float sum = 0.0f;
    for (int64_t p = 0; p < n_pos; ++p) {
      scratch[p] = std::exp(scratch[p] - max);
      sum += scratch[p];
    }
    for (int64_t p = 0; p < n_pos; ++p) {
      const float* v = KvSlice(kv.v_type, kv.v, kv.v_row_bytes, p, v_off, hd, row.data());
      const float e = scratch[p];
      for (int d = 0; d < hd; ++d) oh[d] += e * v[d];
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; ++d) oh[d] *= inv;
  }
}

void AttentionRows(const float* q, int64_t ldq, int64_t n_q, int n_head, const KvView& kv,
                   const int64_t* n_pos, float scale, float* out, int64_t ldo, float* scratch) {
  for (int64_t i = 0; i < n_q; ++i) {
    AttentionOne(q + i * ldq, n_head, kv, n_pos[i], scale, out + i * ldo, scratch);
  }
}

void DeltaRule(float* s, const float* k, const float* v, const float* q, float decay, float beta,
               int64_t d_k, int64_t d_v, float* delta, float* out) {
  // S^T k of the old state; the decay is applied to the sum.
  for (int64_t c = 0; c < d_v; ++c) delta[c] = 0.0f;
  for (int64_t r = 0; r < d_k; ++r) {
    const float* row = s + r * d_v;
    for (int64_t c = 0; c < d_v; ++c) delta[c] += k[r] * row[c];
  }
  for (int64_t c = 0; c < d_v; ++c) delta[c] = beta * (v[c] - decay * delta[c]);
  // Decay, write and read in one pass.
  for (int64_t c = 0; c < d_v; ++c) out[c] = 0.0f;
  for (int64_t r = 0; r < d_k; ++r) {
    float* row = s + r * d_v;
    for (int64_t c = 0; c < d_v; ++c) {
      row[c] = decay * row[c] + k[r] * delta[c];
      out[c] += q[r] * row[c];
    }
  }
}

int64_t DirectMaxTokens(DType type) { return type == DType::kF32 ? 16 : 0; }

const IsaOps kScalarOps = {
    .isa = Isa::kScalar,
    .gemm = Gemm,
    .direct_max_tokens = DirectMaxTokens,
    .dequant_row = Dequant,
    .qgemm = QGemm,
    .quantize_q8k = QuantizeQ8KRef,
    .qgemm32 = QGemm32,
    .quantize_q8_32 = QuantizeQ8_32Ref,
    .f32_to_f16 = F32ToF16Row,
    .f16_to_f32 = F16ToF32Row,
    .sum_squares = SumSquares,
    .scale_mul = ScaleMul,
    .swiglu = SwiGlu,
    .sum_exp = SumExp,
    .max_value = MaxValue,
    .silu = Silu,
    .attention_rows = AttentionRows,
    .attention_scores = nullptr,  // no two-phase attention on this path
    .attention_from_scores = nullptr,
    .delta_rule = DeltaRule,
    .pack_bf16 = nullptr,
    .bgemm = nullptr,
};

}  // namespace

const IsaOps& ScalarOps() { return kScalarOps; }

}  // namespace mx::kernels::internal
