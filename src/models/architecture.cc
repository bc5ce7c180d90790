#include "models/architecture.h"

namespace mx::models {
namespace {

const Architecture* const kArchitectures[] = {
    &kLlamaArchitecture,     &kQwen2Architecture,  &kQwen3Architecture,
    &kNemotronHArchitecture, &kQwen35Architecture, &kSmolLm3Architecture,
    &kGraniteArchitecture,   &kPhi3Architecture,   &kGemma3Architecture,
    &kMistral3Architecture, &kQwen3MoeArchitecture, &kQwen35MoeArchitecture,
    &kNemotronHMoeArchitecture, &kGptOssArchitecture};

}  // namespace

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture* a : kArchitectures) {
    if (name == a->name) return a;
  }
  return nullptr;
}

std::string SupportedArchitectureNames() {
  std::string s;
  for (const Architecture* a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a->name);
  return s;
}

std::string ArchitectureTable() {
  std::string s =
      "| `general.architecture` | the files | checked against (`../shared/ref`) |\n"
      "| --- | --- | --- |\n";
  for (const Architecture* a : kArchitectures) {
    s += "| `" + std::string(a->name) + "` | " + a->models + " | " + a->reference + " |\n";
  }
  return s;
}

}  // namespace mx::models
