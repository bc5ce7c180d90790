// Test support: reference models derived from a ../shared/ref model by
// rewriting its metadata (another architecture, RoPE or attention keys; the
// same tensors). llama.cpp's outputs for them live in tests/data/ref, in the
// JSON layout of ../shared/ref, computed from the exact file written here
// (its SHA-256 is in the JSON). Test-only.
#pragma once

#include <string>

namespace mx::testing {

// The derived models' names ("tiny-mistral3", ...), for parametrized tests.
bool IsDerivedModel(const std::string &name);
// Writes the derived model `name` at `path` (atomically: a temporary beside
// it, then a rename). Returns an error message, empty on success.
std::string WriteDerivedModel(const std::string &name, const std::string &path);
// Lower-case hex SHA-256 of the file at `path` ("" when unreadable).
std::string FileSha256(const std::string &path);

} // namespace mx::testing
