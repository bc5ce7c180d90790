#include "derived_models.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace mx::testing {
namespace {

struct Derivation {
  const char *source; // a model of ../shared/ref/models
  const char *arch;   // the new general.architecture
  // Keys added or replaced after the source's "<arch>." keys were renamed.
  std::function<void(gguf::GgufWriter &, const std::string &arch)> keys;
};

const std::map<std::string, Derivation> &Derivations() {
  static const auto *derivations = new std::map<std::string, Derivation>{
      // mistral3 with every key it reads set away from its default: YaRN with
      // its beta and log-multiplier keys, and an attention temperature that
      // starts at position 128 (the prompts reach 561).
      {"tiny-mistral3",
       {"tiny-llama", "mistral3",
        [](gguf::GgufWriter &w, const std::string &a) {
          w.SetString(a + ".rope.scaling.type", "yarn");
          w.SetF32(a + ".rope.scaling.factor", 4.0f);
          w.SetU32(a + ".rope.scaling.original_context_length", 128);
          w.SetF32(a + ".rope.scaling.yarn_beta_fast", 16.0f);
          w.SetF32(a + ".rope.scaling.yarn_beta_slow", 2.0f);
          w.SetF32(a + ".rope.scaling.yarn_log_multiplier", 0.5f);
          w.SetF32(a + ".attention.temperature_scale", 0.25f);
        }}},
  };
  return *derivations;
}

} // namespace

bool IsDerivedModel(const std::string &name) {
  return Derivations().count(name) != 0;
}

std::string WriteDerivedModel(const std::string &name,
                              const std::string &path) {
  const auto it = Derivations().find(name);
  if (it == Derivations().end())
    return "no derived model " + name;
  const Derivation &d = it->second;
  const std::string source =
      std::string(MATRICXON_REF_DIR) + "/models/" + d.source + ".gguf";
  auto file = gguf::GgufFile::Open(Env::Default(), source);
  if (!file.ok())
    return file.status().ToString();
  const gguf::GgufFile &f = **file;
  const std::string old_arch = f.Find("general.architecture")->str;
  gguf::GgufWriter w;
  for (const auto &[key, value] : f.metadata()) {
    std::string k = key;
    if (k.rfind(old_arch + ".", 0) == 0)
      k = std::string(d.arch) + k.substr(old_arch.size());
    if (Status st = w.SetValue(k, value); !st.ok())
      return st.ToString();
  }
  w.SetString("general.architecture", d.arch);
  w.SetString("general.name", name);
  d.keys(w, d.arch);
  for (const gguf::TensorInfo &t : f.tensors()) {
    std::string bytes(reinterpret_cast<const char *>(t.data), t.n_bytes);
    if (Status st = w.AddTensor(t.name, t.type, t.shape, std::move(bytes));
        !st.ok()) {
      return st.ToString();
    }
  }
  const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::string bytes = w.Serialize();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
      return "cannot write " + tmp;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return "cannot rename " + tmp + " to " + path;
  return "";
}

std::string FileSha256(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  static const char *kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

} // namespace mx::testing
