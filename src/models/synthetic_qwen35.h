// Internal to the synthetic model writer (synthetic_spec.cc checks a spec,
// synthetic_model.cc writes it): the derived sizes of a qwen35 spec.
#pragma once

#include <array>
#include <cstdint>

#include "models/synthetic_model.h"

namespace mx::models::synthetic {

// The derived sizes of a qwen35 spec. The DeltaNet projection attn_qkv has
// rows q (key_dim) | k (key_dim) | v (value_dim); the conv runs over all of them.
struct Qwen35Dims {
  int64_t key_dim, value_dim, conv_dim;  // key_dim = key heads x head dim
  int64_t n_rot;                         // rotated dims per attention head
  std::array<int32_t, 4> sections;
};

inline Qwen35Dims DimsOf(const SyntheticSpec& s, int64_t head_dim) {
  Qwen35Dims d;
  d.key_dim = s.linear_key_heads * s.linear_head_dim;
  d.value_dim = s.linear_value_heads * s.linear_head_dim;
  d.conv_dim = 2 * d.key_dim + d.value_dim;
  d.n_rot = s.rope_dims > 0 ? s.rope_dims : head_dim;
  d.sections = s.rope_sections;
  if (d.sections == std::array<int32_t, 4>{0, 0, 0, 0}) {
    const auto pairs = static_cast<int32_t>(d.n_rot / 2);
    for (int32_t k = 0; k < 3; ++k) d.sections[k] = pairs / 3 + (k < pairs % 3 ? 1 : 0);
  }
  return d;
}

inline bool IsQwen35Attention(const SyntheticSpec& s, int64_t layer) {
  return (layer + 1) % s.full_attention_interval == 0;
}

}  // namespace mx::models::synthetic
