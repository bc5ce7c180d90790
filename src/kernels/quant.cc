// Scalar reference (de)quantization of ggml block types (ENGINE-FACTS §2).
// Block dequantization lives in dequant_blocks.h (ggml's f32 expression
// order), shared with the SIMD paths so they reproduce it bit for bit.
// Quantizers are simple round-to-nearest ones; Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1
// produce the same bytes as ggml's / gguf-py's reference quantizers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "kernels/dequant_blocks.h"
#include "kernels/isa.h"
#include "kernels/quant_helpers.h"

namespace mx::kernels::internal {
namespace {

struct ScalarCvt {
  static float Half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return Fp16ToF32(h);
  }
};
inline void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

void PackScaleMinK4(const int* sc, const int* m, uint8_t* q) {
  for (int s = 0; s < 4; ++s) {
    q[s] = static_cast<uint8_t>((sc[s] & 63) | ((sc[s + 4] >> 4) << 6));
    q[s + 4] = static_cast<uint8_t>((m[s] & 63) | ((m[s + 4] >> 4) << 6));
    q[s + 8] = static_cast<uint8_t>((sc[s + 4] & 15) | ((m[s + 4] & 15) << 4));
  }
}

// ---------------------------------------------------------------- quantize

// ggml's reference Q8_0: d = amax / 127 (f32), q = roundf(x / d) computed as
// x * (1 / d), d stored as fp16.
void QuantQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(b, d);
  for (int j = 0; j < 32; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
}
void QuantQ4_0(const float* x, uint8_t* b) {
  const float d = SignedAbsMax(x, 32) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(b, d);
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    b[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}
void QuantQ5_0(const float* x, uint8_t* b) {
  const float d = SignedAbsMax(x, 32) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(b, d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
    b[6 + j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  StoreU32(b + 2, qh);
}
// Q4_1 / Q5_1: d = (max - min) / levels, m = min.
void QuantQx_1(const float* x, uint8_t* b, int levels) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 32; ++j) {
    mn = std::fmin(mn, x[j]);
    mx = std::fmax(mx, x[j]);
  }
  const float d = (mx - mn) / static_cast<float>(levels);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(b, d);
  PutHalf(b + 2, mn);
  int q[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = std::min(levels, static_cast<int>(static_cast<int8_t>((x[j] - mn) * id + 0.5f)));
  }
  uint8_t* qs = b + (levels == 15 ? 4 : 8);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  if (levels == 31) StoreU32(b + 4, qh);
}
inline int Nearest(float v) { return static_cast<int>(std::nearbyintf(v)); }
inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Q4_K (levels 15) / Q5_K (levels 31): per 32-value sub-block an affine
// min..max range, its scale and min quantized to 6 bits against the block's d
// and dmin, then each value rounded to the nearest level of its sub-block.
void QuantQxK(const float* x, uint8_t* b, int levels) {
  float scale[8], minv[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    float mn = 0.0f, mx = x[32 * s];
    for (int l = 0; l < 32; ++l) {
      mn = std::fmin(mn, x[32 * s + l]);
      mx = std::fmax(mx, x[32 * s + l]);
    }
    scale[s] = (mx - mn) / static_cast<float>(levels);
    minv[s] = -mn;
    max_scale = std::fmax(max_scale, scale[s]);
    max_min = std::fmax(max_min, minv[s]);
  }
  const float d = Fp16ToF32(F32ToFp16(max_scale / 63.0f));
  const float dmin = Fp16ToF32(F32ToFp16(max_min / 63.0f));
  int sc[8], m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d > 0.0f ? Clamp(Nearest(scale[s] / d), 0, 63) : 0;
    m[s] = dmin > 0.0f ? Clamp(Nearest(minv[s] / dmin), 0, 63) : 0;
  }
  PutHalf(b, d);
  PutHalf(b + 2, dmin);
  PackScaleMinK4(sc, m, b + 4);
  int q[256];
  for (int s = 0; s < 8; ++s) {
    const float ds = d * static_cast<float>(sc[s]);
    const float ms = dmin * static_cast<float>(m[s]);
    for (int l = 0; l < 32; ++l) {
      q[32 * s + l] = ds > 0.0f ? Clamp(Nearest((x[32 * s + l] + ms) / ds), 0, levels) : 0;
    }
  }
  uint8_t* qs = b + (levels == 15 ? 16 : 48);
  uint8_t* qh = b + 16;
  if (levels == 31) std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      if (levels == 31) {
        qh[l] = static_cast<uint8_t>(qh[l] | (((lo >> 4) & 1) << (2 * c)) |
                                     (((hi >> 4) & 1) << (2 * c + 1)));
      }
    }
  }
}
// Q6_K: per 16-value sub-block a signed scale (largest-magnitude value maps
// to -32), int8 scales against the block's d, values rounded to -32..31.
void QuantQ6K(const float* x, uint8_t* b) {
  float scale[16];
  float max_abs_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = SignedAbsMax(x + 16 * s, 16) / -32.0f;
    max_abs_scale = std::fmax(max_abs_scale, std::fabs(scale[s]));
  }
  const float d = Fp16ToF32(F32ToFp16(max_abs_scale / 127.0f));
  int8_t sc[16];
  for (int s = 0; s < 16; ++s)
    sc[s] = static_cast<int8_t>(d > 0.0f ? Clamp(Nearest(scale[s] / d), -128, 127) : 0);
  int q[256];
  for (int e = 0; e < 256; ++e) {
    const float ds = d * static_cast<float>(sc[e / 16]);
    q[e] = (ds != 0.0f ? Clamp(Nearest(x[e] / ds), -32, 31) : 0) + 32;
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  std::memset(b, 0, 192);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
    uint8_t& lb = ql[64 * n + l + 32 * (k & 1)];
    lb = static_cast<uint8_t>(lb | (k < 2 ? (q[e] & 0xF) : ((q[e] & 0xF) << 4)));
    qh[32 * n + l] = static_cast<uint8_t>(qh[32 * n + l] | (((q[e] >> 4) & 3) << (2 * k)));
  }
  std::memcpy(b + 192, sc, 16);
  PutHalf(b + 208, d);
}

using BlockQuant = void (*)(const float*, uint8_t*);

BlockQuant QuantFor(DType type) {
  switch (type) {
    case DType::kQ4_0:
      return QuantQ4_0;
    case DType::kQ4_1:
      return [](const float* x, uint8_t* b) { QuantQx_1(x, b, 15); };
    case DType::kQ5_0:
      return QuantQ5_0;
    case DType::kQ5_1:
      return [](const float* x, uint8_t* b) { QuantQx_1(x, b, 31); };
    case DType::kQ8_0:
      return QuantQ8_0;
    case DType::kQ4_K:
      return [](const float* x, uint8_t* b) { QuantQxK(x, b, 15); };
    case DType::kQ5_K:
      return [](const float* x, uint8_t* b) { QuantQxK(x, b, 31); };
    case DType::kQ6_K:
      return QuantQ6K;
    default:
      return LowbitQuantFor(type);
  }
}

}  // namespace

bool DequantizeSupportedRef(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kBF16 ||
         BlockDequantFor<ScalarCvt>(static_cast<uint32_t>(type)).fn != nullptr;
}
bool QuantizeSupportedRef(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kBF16 ||
         QuantFor(type) != nullptr;
}

bool DequantizeRowRef(DType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return true;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Fp16ToF32(h);
      }
      return true;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Bf16ToF32(h);
      }
      return true;
    default:
      break;
  }
  return DequantBlocks<ScalarCvt>(static_cast<uint32_t>(type), src, dst, n);
}

bool QuantizeRowRef(DType type, const float* src, uint8_t* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return true;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToFp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return true;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return true;
    default:
      break;
  }
  BlockQuant fn = QuantFor(type);
  if (fn == nullptr) return false;
  const DTypeInfo info = GetDTypeInfo(type);
  for (int64_t i = 0; i < n / info.block_values; ++i) {
    fn(src + i * info.block_values, dst + static_cast<size_t>(i) * info.block_bytes);
  }
  return true;
}

namespace {

// The float -> int conversion of x86's cvtps2dq after a round to nearest
// even: NaN and out-of-range values give INT32_MIN (what llama.cpp's packs
// then saturate), never undefined behaviour.
inline int32_t NearestCvt(float v) {
  const float r = std::nearbyintf(v);
  return r >= -2147483648.0f && r < 2147483648.0f ? static_cast<int32_t>(r) : INT32_MIN;
}
inline int8_t SaturateI8(int32_t v) { return static_cast<int8_t>(Clamp(v, -128, 127)); }

// A Q8_0 KV block as llama.cpp's x86 quantize_row_q8_0 writes it (the
// from_float of its set_rows): d = fp16(a / 127), q = RNE(x * (127 / a)).
void QuantKvQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  PutHalf(b, amax / 127.0f);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(SaturateI8(NearestCvt(x[j] * id)));
}
// A Q4_0 KV block as quantize_row_q4_0_ref writes it; a value that is not a
// number becomes the block's zero level (8) instead of undefined behaviour.
void QuantKvQ4_0(const float* x, uint8_t* b) {
  const float d = SignedAbsMax(x, 32) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(b, d);
  auto level = [id](float v) {
    const float t = v * id + 8.5f;
    if (!(t >= 0.0f && t < 127.0f)) return t >= 127.0f ? 15 : (t < 0.0f ? 0 : 8);
    return std::min(15, static_cast<int>(static_cast<int8_t>(t)));
  };
  for (int j = 0; j < 16; ++j) {
    b[2 + j] = static_cast<uint8_t>(level(x[j]) | (level(x[j + 16]) << 4));
  }
}

}  // namespace

bool QuantizeKvRowRef(DType type, const float* src, uint8_t* dst, int64_t n) {
  BlockQuant fn = type == DType::kQ8_0 ? QuantKvQ8_0 : type == DType::kQ4_0 ? QuantKvQ4_0 : nullptr;
  if (fn == nullptr || n % 32 != 0) return false;
  const size_t block_bytes = GetDTypeInfo(type).block_bytes;
  for (int64_t i = 0; i < n / 32; ++i) fn(src + 32 * i, dst + static_cast<size_t>(i) * block_bytes);
  return true;
}

// llama.cpp's quantize_row_q8_K_ref: the first value of largest magnitude
// maps to -127; q = min(127, x * iscale rounded to nearest even).
void QuantizeQ8KRef(const float* x, int64_t n, Q8KBlock* out) {
  for (int64_t ib = 0; ib < n / kQ8KValues; ++ib, x += kQ8KValues) {
    Q8KBlock& b = out[ib];
    const float max = SignedAbsMax(x, static_cast<int>(kQ8KValues));
    if (max == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQ8KValues; ++j) {
      b.q[j] = static_cast<int8_t>(std::min(127, Nearest(iscale * x[j])));
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.q[16 * g + j];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

// llama.cpp's x86 quantize_row_q8_0 (its AVX2 code, which its AVX-512 builds
// run): a = max |x|, d = a / 127 stored as fp16, q = x * (127 / a) rounded to
// nearest even (not the reference's round-half-away of x / d).
void QuantizeQ8_32Ref(const float* x, int64_t n, Q8Block32* out) {
  for (int64_t ib = 0; ib < n / kQ8Block32Values; ++ib, x += kQ8Block32Values) {
    Q8Block32& b = out[ib];
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    b.d = Fp16ToF32(F32ToFp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      b.q[j] = static_cast<int8_t>(Nearest(x[j] * id));
      sum += b.q[j];
    }
    b.sum = sum;
  }
}

}  // namespace mx::kernels::internal
