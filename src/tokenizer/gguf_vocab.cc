#include "tokenizer/gguf_vocab.h"

namespace mx::tokenizer {
namespace {

// Optional integer id: -1 when the key is absent.
Result<int32_t> OptionalId(const gguf::GgufFile& f, const std::string& key) {
  if (f.Find(key) == nullptr) return -1;
  MX_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v < -1 || v > INT32_MAX) {
    return Status::InvalidArgument(key + " = " + std::to_string(v) + " is not a token id");
  }
  return static_cast<int32_t>(v);
}

Result<std::optional<bool>> OptionalBool(const gguf::GgufFile& f, const std::string& key) {
  if (f.Find(key) == nullptr) return std::optional<bool>();
  MX_ASSIGN_OR_RETURN(bool v, f.GetBool(key));
  return std::optional<bool>(v);
}

}  // namespace

Result<VocabData> VocabFromGguf(const gguf::GgufFile& f) {
  VocabData d;
  MX_ASSIGN_OR_RETURN(d.model, f.GetString("tokenizer.ggml.model"));
  if (f.Find("tokenizer.ggml.pre") != nullptr) {
    MX_ASSIGN_OR_RETURN(d.pre, f.GetString("tokenizer.ggml.pre"));
  }
  if (f.Find("general.name") != nullptr) {
    auto name = f.GetString("general.name");
    if (name.ok()) d.model_name = *name;
  }
  MX_ASSIGN_OR_RETURN(d.tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  if (f.Find("tokenizer.ggml.token_type") != nullptr) {
    MX_ASSIGN_OR_RETURN(auto types, f.GetIntArray("tokenizer.ggml.token_type"));
    d.types.assign(types.begin(), types.end());
  }
  if (f.Find("tokenizer.ggml.scores") != nullptr) {
    MX_ASSIGN_OR_RETURN(auto scores, f.GetFloatArray("tokenizer.ggml.scores"));
    d.scores.assign(scores.begin(), scores.end());
  }
  if (f.Find("tokenizer.ggml.merges") != nullptr) {
    MX_ASSIGN_OR_RETURN(d.merges, f.GetStringArray("tokenizer.ggml.merges"));
  }
  MX_ASSIGN_OR_RETURN(d.bos_id, OptionalId(f, "tokenizer.ggml.bos_token_id"));
  MX_ASSIGN_OR_RETURN(d.eos_id, OptionalId(f, "tokenizer.ggml.eos_token_id"));
  MX_ASSIGN_OR_RETURN(d.eot_id, OptionalId(f, "tokenizer.ggml.eot_token_id"));
  MX_ASSIGN_OR_RETURN(d.eom_id, OptionalId(f, "tokenizer.ggml.eom_token_id"));
  MX_ASSIGN_OR_RETURN(d.unk_id, OptionalId(f, "tokenizer.ggml.unknown_token_id"));
  MX_ASSIGN_OR_RETURN(d.pad_id, OptionalId(f, "tokenizer.ggml.padding_token_id"));
  MX_ASSIGN_OR_RETURN(d.add_bos, OptionalBool(f, "tokenizer.ggml.add_bos_token"));
  MX_ASSIGN_OR_RETURN(d.add_eos, OptionalBool(f, "tokenizer.ggml.add_eos_token"));
  MX_ASSIGN_OR_RETURN(d.add_space_prefix, OptionalBool(f, "tokenizer.ggml.add_space_prefix"));
  return d;
}

Result<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const gguf::GgufFile& f) {
  auto vocab = VocabFromGguf(f);
  if (!vocab.ok()) return vocab.status().WithContext(f.path());
  auto tok = Tokenizer::Create(std::move(vocab).value());
  if (!tok.ok()) return tok.status().WithContext(f.path());
  return tok;
}

}  // namespace mx::tokenizer
