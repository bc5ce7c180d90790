// llama.cpp's own tokenizer test suite on real vocabularies
// (../shared/vocab, README there): every input of every vocabulary file
// tokenizes to llama.cpp's ids (add_special = false, parse_special = false).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace mx::tokenizer {
namespace {

std::string VocabDir() { return std::string(MATRICXON_REF_DIR) + "/../vocab"; }

std::vector<std::string> Inputs(const std::string& text) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t next; (next = text.find(sep, at)) != std::string::npos; at = next + sep.size()) {
    out.push_back(text.substr(at, next - at));
  }
  if (at < text.size()) out.push_back(text.substr(at));  // the files end with a separator
  return out;
}

std::vector<std::vector<int32_t>> Outputs(const std::string& text) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    for (int32_t id; ids >> id;) v.push_back(id);
    out.push_back(v);
  }
  return out;
}

class VocabSuiteTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabSuiteTest, EveryInputGivesLlamaCppsIds) {
  const std::string base = VocabDir() + "/ggml-vocab-" + GetParam() + ".gguf";
  auto file = gguf::GgufFile::Open(Env::Default(), base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = TokenizerFromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto inp = Env::Default()->ReadFile(base + ".inp");
  auto outp = Env::Default()->ReadFile(base + ".out");
  ASSERT_TRUE(inp.ok() && outp.ok());
  const std::vector<std::string> inputs = Inputs(*inp);
  const std::vector<std::vector<int32_t>> want = Outputs(*outp);
  ASSERT_EQ(want.size(), inputs.size());
  int failed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t> got = (*tok)->Encode(inputs[i], /*add_special=*/false,
                                                    /*parse_special=*/false);
    if (got != want[i]) {
      ++failed;
      ADD_FAILURE() << "input " << i << " '" << inputs[i] << "'";
    }
  }
  EXPECT_EQ(failed, 0) << "of " << inputs.size();
}

// Phi-3's special tokens swallow the whitespace after them in llama.cpp
// (RSTRIP, set by model name): "<|user|>\nHi<|end|>" is 4 ids there with BOS
// (<s>, <|user|>, ▁Hi, <|end|>), not 10: the newline goes.
TEST(VocabSpecialTest, Phi3SpecialTokensStripTheWhitespaceAfterThem) {
  auto file = gguf::GgufFile::Open(Env::Default(), VocabDir() + "/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = TokenizerFromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<int32_t> ids =
      (*tok)->Encode("<|user|>\nHi<|end|>", /*add_special=*/false, /*parse_special=*/true);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ((*tok)->Encode("<|user|>\nHi<|end|>", /*add_special=*/true, true).size(), 4u);
  EXPECT_EQ((*tok)->TokenToPiece(ids.front()), "<|user|>");
  EXPECT_EQ((*tok)->TokenToPiece(ids.back()), "<|end|>");
  // The same text with " \n" after <|end|> too: stripped as well.
  EXPECT_EQ((*tok)->Encode("<|user|>\nHi<|end|> \n", false, true), ids);
  // Without parse_special the text stays text: nothing is stripped.
  EXPECT_GT((*tok)->Encode("<|user|>\nHi<|end|>", false, false).size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, VocabSuiteTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm",
                                           "deepseek-coder"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

}  // namespace
}  // namespace mx::tokenizer
