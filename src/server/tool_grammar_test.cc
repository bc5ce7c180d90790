// Forced tool calls: for every syntax the server can write, replies drawn
// at random under the call grammar (a real 50k vocabulary, the real
// sampler) parse back with the tool-call parser into calls of the request's
// tools whose arguments keep to the tools' schemas.
#include "server/tool_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/sampler.h"
#include "gguf/gguf_file.h"
#include "grammar/grammar_constraint.h"
#include "server/output_constraint.h"
#include "tokenizer/gguf_vocab.h"
#include "toolcalls/tool_calls.h"

namespace mx::server {
namespace {

using nlohmann::ordered_json;
using toolcalls::ToolCallFormat;

std::vector<ToolSpec> Tools() {
  return {{"get_weather", ordered_json::parse(R"({"type":"object","properties":{
              "city":{"type":"string","maxLength":10},
              "unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]})")},
          {"search", ordered_json::parse(R"({"type":"object","properties":{
              "query":{"type":"string","maxLength":12},
              "limit":{"type":"integer","minimum":1,"maximum":20}},"required":["query","limit"]})")}};
}

const toolcalls::ToolSchemas& Schemas() {
  static const toolcalls::ToolSchemas* s = [] {
    nlohmann::json tools = nlohmann::json::array();
    for (const ToolSpec& t : Tools()) {
      tools.push_back(
          {{"type", "function"},
           {"function",
            {{"name", t.name}, {"parameters", nlohmann::json::parse(t.parameters.dump())}}}});
    }
    return new toolcalls::ToolSchemas(toolcalls::ToolSchemas::FromJson(tools));
  }();
  return *s;
}

struct Vocab {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const grammar::GrammarVocab> grammar;
};

const Vocab& Gpt2() {
  static const Vocab* v = [] {
    auto* out = new Vocab;
    auto file = gguf::GgufFile::Open(
        Env::Default(), std::string(MATRICXON_REF_DIR) + "/../vocab/ggml-vocab-gpt-2.gguf");
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    if (!file.ok()) return out;
    auto tok = tokenizer::TokenizerFromGguf(**file);
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    if (!tok.ok()) return out;
    out->tok = std::move(tok).value();
    out->grammar = grammar::GrammarVocabFromTokenizer(*out->tok).value();
    return out;
  }();
  return *v;
}

// Draws tokens under `c` from random logits (the real sampler) and appends
// their text to *text, until the constraint must end, the end is drawn, or,
// once the grammar accepts, with probability 1/3 at each step. False (with a
// failure) when no token was allowed or 600 tokens did not end it.
bool DrawUnder(grammar::GrammarConstraint& c, uint64_t seed, std::string* text) {
  const Vocab& v = Gpt2();
  engine::SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  engine::Sampler sampler(p);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(v.tok->n_vocab()));
  for (int step = 0; step < 600; ++step) {
    if (c.MustEnd() || (c.IsAccepting() && rng() % 3 == 0)) return true;
    for (float& x : logits) x = dist(rng);
    const int32_t id = sampler.Sample(logits, {}, &c);
    EXPECT_GE(id, 0) << "no token allowed after: " << *text;
    if (id < 0) return false;
    if (v.tok->IsEog(id)) return true;
    c.Accept(id);
    *text += v.tok->TokenToPiece(id);
  }
  ADD_FAILURE() << "no end after 600 tokens: " << *text;
  return false;
}

// A reply drawn under the grammar from its start; empty on failure.
std::string Draw(const std::string& gbnf, uint64_t seed) {
  const Vocab& v = Gpt2();
  auto g = grammar::ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << gbnf;
  if (!g.ok() || v.grammar == nullptr) return "";
  auto c = grammar::GrammarConstraint::Create(*g, v.grammar).value();
  std::string text;
  return DrawUnder(*c, seed, &text) ? text : "";
}

void ExpectCallsKeepToTheSchemas(const toolcalls::ParsedToolCalls& parsed, const std::string& only,
                                 bool parallel, const std::string& text) {
  ASSERT_FALSE(parsed.calls.empty()) << text;
  if (!parallel) {
    EXPECT_EQ(parsed.calls.size(), 1u) << text;
  }
  for (const toolcalls::ToolCall& call : parsed.calls) {
    const auto args = nlohmann::json::parse(call.arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << call.arguments << "\n" << text;
    if (!only.empty()) {
      EXPECT_EQ(call.name, only) << text;
    }
    if (call.name == "get_weather") {
      ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << call.arguments;
      EXPECT_LE(args["city"].get<std::string>().size(), 40u);  // 10 characters, up to 4 bytes each
      if (args.contains("unit")) {
        EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << call.arguments;
      }
    } else {
      ASSERT_EQ(call.name, "search") << text;
      ASSERT_TRUE(args.contains("query") && args["query"].is_string()) << call.arguments;
      ASSERT_TRUE(args.contains("limit") && args["limit"].is_number_integer()) << call.arguments;
      EXPECT_GE(args["limit"].get<int>(), 1);
      EXPECT_LE(args["limit"].get<int>(), 20);
    }
  }
}

class ToolGrammarTest : public ::testing::TestWithParam<ToolCallFormat> {};

TEST_P(ToolGrammarTest, DrawnCallsParseBackIntoTheTools) {
  const ToolCallFormat format = GetParam();
  for (const bool parallel : {false, true}) {
    for (const std::string only : {"", "search"}) {
      auto gbnf = ToolCallGbnf(format, Tools(), only, parallel);
      ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        SCOPED_TRACE(std::string(toolcalls::ToolCallFormatName(format)) + " parallel=" +
                     std::to_string(parallel) + " only=" + only + " seed=" + std::to_string(seed));
        const std::string text = Draw(*gbnf, seed * 7919 + parallel);
        ASSERT_FALSE(text.empty());
        const toolcalls::ParsedToolCalls parsed =
            toolcalls::ParseToolCalls(format, text, &Schemas());
        ExpectCallsKeepToTheSchemas(parsed, only, parallel, text);
        EXPECT_EQ(parsed.content.find_first_not_of(" \n"), std::string::npos)
            << "a forced reply is calls only: " << text;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Syntaxes, ToolGrammarTest,
    ::testing::Values(ToolCallFormat::kHermes, ToolCallFormat::kQwen3Xml, ToolCallFormat::kSeedOss,
                      ToolCallFormat::kLlama3Json, ToolCallFormat::kMistralJson,
                      ToolCallFormat::kMistralArgs, ToolCallFormat::kHarmony,
                      ToolCallFormat::kDeepSeekR1, ToolCallFormat::kDeepSeekV31,
                      ToolCallFormat::kKimiK2, ToolCallFormat::kFunctionaryV31,
                      ToolCallFormat::kFirefunction, ToolCallFormat::kGranite,
                      ToolCallFormat::kCommandR),
    [](const auto& info) { return std::string(toolcalls::ToolCallFormatName(info.param)); });

// tool_choice "auto": free text until the syntax's opening marker, then a
// well-formed call; what the parser makes of it is the text before as
// content and the call.
class LazyToolGrammarTest : public ::testing::TestWithParam<ToolCallFormat> {};

TEST_P(LazyToolGrammarTest, TextThenTheMarkerThenAWellFormedCall) {
  const ToolCallFormat format = GetParam();
  const Vocab& v = Gpt2();
  ASSERT_NE(v.grammar, nullptr);
  auto tg = ToolCallGrammarFor(format, Tools(), "", /*parallel=*/true, /*lazy=*/true);
  ASSERT_TRUE(tg.ok()) << tg.status().ToString();
  ASSERT_FALSE(tg->trigger.empty());
  auto g = grammar::ParseGbnf(tg->gbnf);
  ASSERT_TRUE(g.ok()) << g.status().ToString() << "\n" << tg->gbnf;
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    auto c = grammar::GrammarConstraint::CreateLazy(*g, v.grammar, {tg->trigger}).value();
    // Before the marker anything goes, the end included.
    std::string text = "Let me look that up.";
    for (int32_t id : v.tok->Encode(text, false, false)) {
      ASSERT_TRUE(c->Allows(id));
      c->Accept(id);
    }
    EXPECT_TRUE(c->Allows(v.tok->eos_id()));
    text += " " + tg->trigger;
    for (int32_t id : v.tok->Encode(" " + tg->trigger, false, false)) {
      ASSERT_TRUE(c->Allows(id)) << v.tok->TokenToPiece(id);
      c->Accept(id);
    }
    ASSERT_TRUE(c->triggered());
    ASSERT_TRUE(DrawUnder(*c, seed, &text)) << text;
    const toolcalls::ParsedToolCalls parsed = toolcalls::ParseToolCalls(format, text, &Schemas());
    EXPECT_EQ(parsed.content, "Let me look that up.") << text;
    ExpectCallsKeepToTheSchemas(parsed, "", true, text);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Syntaxes, LazyToolGrammarTest,
    ::testing::Values(ToolCallFormat::kHermes, ToolCallFormat::kQwen3Xml, ToolCallFormat::kSeedOss,
                      ToolCallFormat::kMistralJson, ToolCallFormat::kMistralArgs,
                      ToolCallFormat::kDeepSeekR1, ToolCallFormat::kDeepSeekV31,
                      ToolCallFormat::kKimiK2, ToolCallFormat::kFunctionaryV31,
                      ToolCallFormat::kGranite, ToolCallFormat::kCommandR),
    [](const auto& info) { return std::string(toolcalls::ToolCallFormatName(info.param)); });

TEST(LazyToolGrammarTest, SyntaxesWithoutAMarkerHaveNoLazyGrammar) {
  for (ToolCallFormat f :
       {ToolCallFormat::kLlama3Json, ToolCallFormat::kFirefunction, ToolCallFormat::kHarmony}) {
    EXPECT_FALSE(ToolCallGrammarFor(f, Tools(), "", true, true).ok())
        << toolcalls::ToolCallFormatName(f);
  }
  // In "auto" mode such a model's calls are parsed but not constrained.
  ToolOptions tools;
  tools.tools = Tools();
  auto og = OutputGrammarFor(ResponseFormat(), &tools, ToolCallFormat::kLlama3Json, false);
  ASSERT_TRUE(og.ok());
  EXPECT_TRUE(og->gbnf.empty());
  og = OutputGrammarFor(ResponseFormat(), &tools, ToolCallFormat::kHermes, false);
  ASSERT_TRUE(og.ok());
  EXPECT_EQ(og->trigger, "<tool_call>");
  og = OutputGrammarFor(ResponseFormat(), &tools, ToolCallFormat::kHermes, /*think_open=*/true);
  EXPECT_TRUE(og->gbnf.empty());  // a thought may mention the marker
}

TEST(ToolGrammarErrorsTest, SyntaxesItCannotWriteAndBadSchemasAreNamed) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kGlm, ToolCallFormat::kMiniCpm,
                           ToolCallFormat::kDeepSeekDsml}) {
    auto r = ToolCallGbnf(f, Tools(), "", true);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'tool_choice'"), std::string::npos)
        << r.status().ToString();
  }
  std::vector<ToolSpec> bad = Tools();
  bad[1].parameters = ordered_json::parse(
      R"({"type":"object","properties":{"q":{"type":"string","pattern":"x"}}})");
  auto r = ToolCallGbnf(ToolCallFormat::kHermes, bad, "", true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tools[1].function.parameters"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("pattern"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(ToolCallGbnf(ToolCallFormat::kHermes, Tools(), "nope", true).ok());
}

// A thinking model whose prompt opened a think block: the forced call (or
// JSON) is constrained only after </think>; the thought before it is free.
TEST(OutputGrammarTest, AThoughtComesFirstWhenThePromptOpenedAThinkBlock) {
  ToolOptions tools;
  tools.tools = Tools();
  tools.choice = ToolChoice::kNamed;
  tools.named = "get_weather";
  tools.parallel = false;
  auto og =
      OutputGrammarFor(ResponseFormat(), &tools, ToolCallFormat::kHermes, /*think_open=*/true);
  ASSERT_TRUE(og.ok()) << og.status().ToString();
  EXPECT_EQ(og->trigger, "</think>");
  const Vocab& v = Gpt2();
  ASSERT_NE(v.grammar, nullptr);
  auto g = grammar::ParseGbnf(og->gbnf);
  ASSERT_TRUE(g.ok()) << g.status().ToString() << "\n" << og->gbnf;
  auto follows = [&](const std::string& text) {
    auto c = grammar::GrammarConstraint::CreateLazy(*g, v.grammar, {"</think>"}).value();
    for (int32_t id : v.tok->Encode(text, false, false)) {
      if (!c->Allows(id)) return false;
      c->Accept(id);
    }
    return true;
  };
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  EXPECT_TRUE(follows("The user wants the weather, I may say anything here.</think>\n\n" + call));
  EXPECT_FALSE(follows("Thinking.</think>\n\nSure, here you go"));
  EXPECT_FALSE(follows("Thinking.</think>\n\n<tool_call>\n{\"name\": \"search\""));
  // Without an open think block the call comes at once.
  auto plain = OutputGrammarFor(ResponseFormat(), &tools, ToolCallFormat::kHermes, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->trigger, "");
  ResponseFormat json;
  json.kind = ResponseFormat::Kind::kJsonObject;
  auto j = OutputGrammarFor(json, nullptr, ToolCallFormat::kNone, true);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->trigger, "</think>");
  ResponseFormat user;
  user.kind = ResponseFormat::Kind::kGrammar;
  user.grammar = "root ::= \"x\"";
  auto u = OutputGrammarFor(user, nullptr, ToolCallFormat::kNone, true);
  EXPECT_EQ(u->trigger, "");  // a client's grammar is the whole reply
  EXPECT_EQ(u->gbnf, user.grammar);
}

}  // namespace
}  // namespace mx::server
