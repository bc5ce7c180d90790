// libFuzzer entry point for the GGUF reader (tests/fuzz/README.md). Parses the
// input and, when it is accepted, reads everything a consumer would: every
// metadata value through every typed getter, and each tensor's first and last
// byte, so that ASan catches a tensor that points outside the input.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = mx::gguf::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!r.ok()) {
    volatile size_t n = r.status().message().size();  // errors must be well formed
    (void)n;
    return 0;
  }
  const mx::gguf::GgufFile& f = *r.value();
  volatile uint64_t sink = f.version() + f.alignment();
  for (const auto& [key, v] : f.metadata()) {
    sink = sink + v.array_size() + v.is_integer() + v.is_float();
    sink = sink + mx::gguf::ValueTypeName(v.type)[0];
    sink = sink + f.GetString(key).ok() + f.GetInt(key).ok() + f.GetFloat(key).ok() +
           f.GetBool(key).ok() + f.GetIntArray(key).ok() + f.GetFloatArray(key).ok() +
           f.GetStringArray(key).ok() + f.GetIntArrayOrScalar(key, 4).ok();
    sink = sink + (f.Find(key) == &v);
  }
  for (const mx::gguf::TensorInfo& t : f.tensors()) {
    sink = sink + t.Describe().size() + static_cast<uint64_t>(t.n_rows());
    sink = sink + t.data[0] + t.data[t.n_bytes - 1];
    sink = sink + (f.FindTensor(t.name) == &t);
  }
  return 0;
}
