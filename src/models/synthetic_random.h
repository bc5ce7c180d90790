// The deterministic randomness of the synthetic model and projector writers
// (synthetic_model.cc, synthetic_projector.cc): splitmix64 with Box-Muller
// normals, one stream per tensor seeded by HashName(seed, tensor name), so
// that a (seed, name) pair always means the same weights.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace mx::models::synthetic {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // In (0, 1).
  double Uniform() {
    return (static_cast<double>(Next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  // Standard normal (Box-Muller, both values used).
  float Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u = Uniform(), v = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u));
    spare_ = static_cast<float>(r * std::sin(2 * M_PI * v));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2 * M_PI * v));
  }

 private:
  uint64_t s_;
  bool has_spare_ = false;
  float spare_ = 0;
};

// FNV-1a of `name`, started from `seed`: a tensor's stream seed.
inline uint64_t HashName(uint64_t seed, std::string_view name) {
  uint64_t h = 14695981039346656037ull ^ seed;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace mx::models::synthetic
