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

}  // namespace mx::models::config_keys

namespace mx::models {
struct ModelConfig;
namespace config_keys {

// The recurrent mixers' sizes ("{arch}.ssm.*": conv_kernel, inner_size,
// state_size, time_step_rank, group_count) into c.ssm_*, validated.
Status ReadSsmSizes(const gguf::GgufFile& f, const std::string& arch, ModelConfig& c);

}  // namespace config_keys
}  // namespace mx::models
