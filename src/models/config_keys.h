// Typed reads of "{arch}.{suffix}" GGUF keys for the architecture files, with
// errors that name the key and the expected vs. actual value.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "gguf/gguf_file.h"

namespace mx::models::config_keys {

// "{arch}.{suffix}" as an integer, or `fallback` when absent (fallback < 0: required).
Result<int64_t> Int(const gguf::GgufFile& f, const std::string& arch, const std::string& suffix,
                    int64_t fallback);
// "{arch}.{suffix}" as a float, or `fallback` when absent.
Result<double> Float(const gguf::GgufFile& f, const std::string& arch, const std::string& suffix,
                     double fallback);
// InvalidArgument "<what> = v, expected 1..max" unless 0 < v <= max.
Status Positive(const std::string& what, int64_t v, int64_t max);

inline constexpr int64_t kMaxDim = 1 << 20;
inline constexpr int64_t kMaxExperts = 512;  // llama.cpp's LLAMA_MAX_EXPERTS

}  // namespace mx::models::config_keys

namespace mx::models {
struct ModelConfig;
namespace config_keys {

// The recurrent mixers' sizes ("{arch}.ssm.*": conv_kernel, inner_size,
// state_size, time_step_rank, group_count) into c.ssm_*, validated.
Status ReadSsmSizes(const gguf::GgufFile& f, const std::string& arch, ModelConfig& c);

// The mixture of experts' sizes ("{arch}.expert_*") into c.moe, validated as
// llama.cpp's loader validates them: expert_count (<= 512), expert_used_count
// (1..expert_count), expert_feed_forward_length (else layer 0's
// feed_forward_length / expert_used_count), with `shared` the shared
// expert's expert_shared_feed_forward_length (else layer 0's
// feed_forward_length), and expert_group_count / expert_group_used_count
// (read for every family). The family sets the gating and the rest.
Status ReadMoeSizes(const gguf::GgufFile& f, const std::string& arch, bool shared, ModelConfig& c);

}  // namespace config_keys
}  // namespace mx::models
