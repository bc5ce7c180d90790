// GrammarConstraint: token rules on small hand-made vocabularies (control,
// end of generation, UTF-8 split across tokens, lazy triggers) and
// randomized decoding under JSON schemas with real vocabularies
// (../shared/vocab): every finished output is JSON that validates against
// the schema, and Allows agrees with Mask for every token along the way.
#include "grammar/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/schema_validator_test_util.h"
#include "tokenizer/gguf_vocab.h"

namespace mx::grammar {
namespace {

using OJson = nlohmann::ordered_json;

std::shared_ptr<const GrammarVocab> SmallVocab(std::vector<std::string> pieces,
                                               std::vector<TokenKind> kinds = {}) {
  if (kinds.empty()) kinds.assign(pieces.size(), TokenKind::kText);
  return GrammarVocab::Create(std::move(pieces), std::move(kinds)).value();
}

std::vector<bool> MaskedAllowed(GrammarConstraint& c, int32_t n) {
  std::vector<float> logits(n, 0.0f);
  c.Mask(logits);
  std::vector<bool> out(n);
  for (int32_t t = 0; t < n; ++t) out[t] = !std::isinf(logits[t]);
  return out;
}

TEST(GrammarConstraintTest, TextEndAndControlTokens) {
  auto vocab = SmallVocab({"ye", "s", "yes", "no", "</s>", "<ctl>", "yesno"},
                          {TokenKind::kText, TokenKind::kText, TokenKind::kText, TokenKind::kText,
                           TokenKind::kEndOfGeneration, TokenKind::kNever, TokenKind::kText});
  auto g = MustParse(R"(root ::= "yes" | "no" | "<ctl>")");
  auto c = GrammarConstraint::Create(g, vocab).value();
  EXPECT_TRUE(c->Allows(0));
  EXPECT_FALSE(c->Allows(1));
  EXPECT_TRUE(c->Allows(2));
  EXPECT_FALSE(c->Allows(4));  // nothing yet: cannot end
  EXPECT_FALSE(c->Allows(5));  // control tokens never, even when their text fits
  EXPECT_FALSE(c->Allows(6));
  EXPECT_FALSE(c->Allows(-1));
  EXPECT_FALSE(c->Allows(7));
  EXPECT_EQ(MaskedAllowed(*c, 7),
            (std::vector<bool>{true, false, true, true, false, false, false}));
  c->Accept(0);
  EXPECT_FALSE(c->MustEnd());
  EXPECT_TRUE(c->Allows(1));
  c->Accept(1);
  EXPECT_TRUE(c->MustEnd());
  EXPECT_TRUE(c->Allows(4));
  EXPECT_EQ(MaskedAllowed(*c, 7),
            (std::vector<bool>{false, false, false, false, true, false, false}));
}

TEST(GrammarConstraintTest, MaskBeyondTheVocabularyIsMasked) {
  auto c = GrammarConstraint::Create(MustParse(R"(root ::= "a")"), SmallVocab({"a"})).value();
  std::vector<float> logits(3, 1.0f);
  c->Mask(logits);
  EXPECT_EQ(logits[0], 1.0f);
  EXPECT_TRUE(std::isinf(logits[1]) && std::isinf(logits[2]));
}

TEST(GrammarConstraintTest, TokenMayEndInsideACharacter) {
  // "é" is C3 A9; "中" is E4 B8 AD.
  auto vocab = SmallVocab({"\xC3", "\xA9", "\xE4", "\xB8\xAD", "\xC3\xA9"});
  auto c = GrammarConstraint::Create(MustParse(R"(root ::= "é"+)"), vocab).value();
  EXPECT_TRUE(c->Allows(0));
  EXPECT_FALSE(c->Allows(1));
  EXPECT_FALSE(c->Allows(2));  // a lead byte no allowed character starts with
  EXPECT_TRUE(c->Allows(4));
  c->Accept(0);
  EXPECT_EQ(MaskedAllowed(*c, 5), (std::vector<bool>{false, true, false, false, false}));
  c->Accept(1);
  EXPECT_TRUE(c->IsAccepting());
  EXPECT_EQ(MaskedAllowed(*c, 5), (std::vector<bool>{true, false, false, false, true}));
}

TEST(GrammarConstraintTest, CloneSharesNothingMutable) {
  auto vocab = SmallVocab({"a", "b"});
  auto proto = GrammarConstraint::Create(MustParse(R"(root ::= "a" "b")"), vocab).value();
  auto one = proto->Clone();
  one->Accept(0);
  EXPECT_TRUE(one->Allows(1));
  EXPECT_TRUE(proto->Allows(0));
  EXPECT_FALSE(proto->Allows(1));
}

TEST(GrammarConstraintTest, LazyModeWaitsForTheTrigger) {
  auto vocab = SmallVocab(
      {"hi ", "<to", "ol>", "ol>{", "ol>x", "{", "}", "</s>", "<tool>"},
      {TokenKind::kText, TokenKind::kText, TokenKind::kText, TokenKind::kText, TokenKind::kText,
       TokenKind::kText, TokenKind::kText, TokenKind::kEndOfGeneration, TokenKind::kNever});
  auto g = MustParse(R"(root ::= "{" "}")");
  auto c = GrammarConstraint::CreateLazy(g, vocab, {"<tool>"}).value();
  for (int32_t t = 0; t < 9; ++t) EXPECT_TRUE(c->Allows(t)) << t;  // anything, EOG included
  EXPECT_FALSE(c->triggered());
  c->Accept(0);
  c->Accept(1);  // "<to": not yet
  EXPECT_FALSE(c->triggered());
  EXPECT_TRUE(c->Allows(2));   // "ol>" completes the trigger, nothing after it
  EXPECT_TRUE(c->Allows(3));   // "ol>{": "{" is the grammar's first input
  EXPECT_FALSE(c->Allows(4));  // "ol>x": "x" is not
  EXPECT_TRUE(c->Allows(7));
  EXPECT_EQ(MaskedAllowed(*c, 9),
            (std::vector<bool>{true, true, true, true, false, true, true, true, true}));
  c->Accept(3);
  EXPECT_TRUE(c->triggered());
  EXPECT_FALSE(c->Allows(5));
  EXPECT_FALSE(c->Allows(7));  // the grammar does not accept yet
  EXPECT_TRUE(c->Allows(6));
  c->Accept(6);
  EXPECT_TRUE(c->MustEnd());
  auto bad = GrammarConstraint::CreateLazy(g, vocab, {});
  EXPECT_FALSE(bad.ok());
}

TEST(GrammarConstraintTest, LazyTriggerInsideAControlTokenText) {
  auto vocab =
      SmallVocab({"a", "<tool>", "{}"}, {TokenKind::kText, TokenKind::kNever, TokenKind::kText});
  auto c = GrammarConstraint::CreateLazy(MustParse(R"(root ::= "{}")"), vocab, {"<tool>"}).value();
  c->Accept(1);  // a special token whose text is the trigger
  EXPECT_TRUE(c->triggered());
  EXPECT_FALSE(c->Allows(0));
  EXPECT_TRUE(c->Allows(2));
}

// --- Randomized decoding with real vocabularies ---------------------------

std::shared_ptr<const GrammarVocab> RealVocab(const std::string& name) {
  const std::string path =
      std::string(MATRICXON_REF_DIR) + "/../vocab/ggml-vocab-" + name + ".gguf";
  auto file = gguf::GgufFile::Open(Env::Default(), path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tok = tokenizer::TokenizerFromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) return nullptr;
  return GrammarVocabFromTokenizer(**tok).value();
}

const char* const kSchemas[] = {
    R"({"type":"object","properties":{
        "name":{"type":"string","maxLength":12},
        "age":{"type":"integer","minimum":0,"maximum":150},
        "tags":{"type":"array","items":{"enum":["a","bb","c d"]},"maxItems":3},
        "active":{"type":"boolean"},
        "nick":{"type":"string","nullable":true,"minLength":1,"maxLength":4}},
       "required":["name","age"]})",
    R"({"anyOf":[{"type":"integer","exclusiveMinimum":-10,"maximum":99},
                 {"type":"string","format":"date"},{"type":"null"}]})",
    R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
        "v":{"type":"integer","minimum":-5,"maximum":5},
        "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
       "required":["v"]}}})",
    R"({"type":"array","prefixItems":[{"type":"string","format":"uuid"},
        {"type":"number","minimum":-1,"maximum":1},{"const":"end"}]})",
    R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"},
        "n":{"type":"number"}},"additionalProperties":{"type":"integer"}})",
    R"({})",
};

struct DecodeResult {
  std::string text;
  bool finished = false;
  int checks = 0;
};

DecodeResult Decode(GrammarConstraint& c, const GrammarVocab& vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  const int32_t n = vocab.n_vocab();
  // Tokens with a closing byte get a growing bonus so that outputs end.
  std::vector<float> closing(n, 0.0f);
  for (int32_t t = 0; t < n; ++t) {
    const std::string& b = vocab.bytes(t);
    if (b.find_first_of("\"}]") != std::string::npos) closing[t] = 1.0f;
    if (vocab.kind(t) == TokenKind::kEndOfGeneration) closing[t] = 4.0f;
  }
  DecodeResult r;
  std::vector<float> logits(n);
  for (int step = 0; step < 400; ++step) {
    const float bonus = step < 30 ? 0.0f : 0.1f * static_cast<float>(step - 30);
    for (int32_t t = 0; t < n; ++t) logits[t] = noise(rng) + bonus * closing[t];
    if (step % 37 == 5) {
      // Allows and Mask agree on every token here.
      std::vector<float> masked(n, 0.0f);
      c.Mask(masked);
      for (int32_t t = 0; t < n; ++t) {
        EXPECT_EQ(c.Allows(t), !std::isinf(masked[t]))
            << "token " << t << " after '" << r.text << "'";
      }
      ++r.checks;
    }
    int32_t best =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (!c.Allows(best)) {  // what the sampler does: mask only on a miss
      c.Mask(logits);
      best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (std::isinf(logits[best])) return r;  // nothing allowed
      EXPECT_TRUE(c.Allows(best));
    }
    if (vocab.kind(best) == TokenKind::kEndOfGeneration) {
      EXPECT_TRUE(c.IsAccepting());
      r.finished = true;
      return r;
    }
    c.Accept(best);
    r.text += vocab.bytes(best);
    if (c.MustEnd()) {
      r.finished = true;
      return r;
    }
  }
  return r;
}

class RandomDecodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomDecodeTest, EveryOutputValidatesAgainstItsSchema) {
  auto vocab = RealVocab(GetParam());
  ASSERT_NE(vocab, nullptr);
  int finished = 0, runs = 0, checks = 0;
  for (size_t si = 0; si < std::size(kSchemas); ++si) {
    const OJson schema = OJson::parse(kSchemas[si]);
    auto g = CompileJsonSchema(schema);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto proto = GrammarConstraint::Create(*g, vocab).value();
    SubsetValidator validator(schema);
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      auto c = proto->Clone();
      DecodeResult r = Decode(static_cast<GrammarConstraint&>(*c), *vocab, seed * 1000 + si);
      ++runs;
      checks += r.checks;
      EXPECT_TRUE(IsPrefix(*g, r.text)) << r.text;
      if (!r.finished) continue;
      ++finished;
      OJson value = OJson::parse(r.text, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(value.is_discarded()) << "schema " << si << ": not JSON: " << r.text;
      EXPECT_EQ(validator.Check(value), "") << "schema " << si << ": " << r.text;
    }
  }
  EXPECT_GE(finished, runs * 3 / 4) << "of " << runs;
  EXPECT_GT(checks, 10);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, RandomDecodeTest,
                         ::testing::Values("gpt-2", "llama-spm", "deepseek-llm"));

TEST(GrammarVocabTest, FromTokenizerMarksControlAndEog) {
  auto vocab = RealVocab("llama-spm");
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->kind(1), TokenKind::kNever);            // <s>
  EXPECT_EQ(vocab->kind(2), TokenKind::kEndOfGeneration);  // </s>
  EXPECT_EQ(vocab->kind(0), TokenKind::kNever);            // <unk>
  EXPECT_EQ(vocab->bytes(3 + 'A'), "A");                   // <0x41> is the byte
  EXPECT_EQ(vocab->kind(3 + 'A'), TokenKind::kText);
  auto c = GrammarConstraint::Create(CompileJsonObject().value(), vocab).value();
  EXPECT_FALSE(c->Allows(1));
  EXPECT_FALSE(c->Allows(2));
}

// A tool-call syntax's markers are special tokens in many vocabularies
// ("[TOOL_CALLS]"); named in control_as_text they are text the grammar may
// write, the other control tokens stay refused.
TEST(GrammarVocabTest, ControlTokensNamedAsTextAreText) {
  auto file = gguf::GgufFile::Open(Env::Default(),
                                   std::string(MATRICXON_REF_DIR) + "/../vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = tokenizer::TokenizerFromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto vocab = GrammarVocabFromTokenizer(**tok, {"<s>"}).value();
  EXPECT_EQ(vocab->kind(1), TokenKind::kText);             // <s>, named
  EXPECT_EQ(vocab->kind(0), TokenKind::kNever);            // <unk>, not named
  EXPECT_EQ(vocab->kind(2), TokenKind::kEndOfGeneration);  // </s> stays the end
  auto c = GrammarConstraint::Create(MustParse(R"(root ::= "<s>" "A")"), vocab).value();
  EXPECT_TRUE(c->Allows(1));
  c->Accept(1);
  EXPECT_TRUE(c->Allows(3 + 'A'));
}

}  // namespace
}  // namespace mx::grammar
