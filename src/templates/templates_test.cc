// Chat templates: family names, the built-in renderers, their errors and
// the prefix property (goldens and detection: templates_golden_test.cc).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "templates/chat_template.h"
#include "templates/templates_test_util.h"
#include "templates/testdata/official_templates.h"

namespace mx::templates {
namespace {

namespace td = testdata;
// ---------------------------------------------------------------------------
// Names and detection.

TEST(FamilyNameTest, RoundTripsEveryFamily) {
  for (TemplateFamily f : kAllFamilies) {
    Result<TemplateFamily> back = FamilyFromName(FamilyName(f));
    ASSERT_TRUE(back.ok()) << FamilyName(f);
    EXPECT_EQ(*back, f);
  }
}

TEST(FamilyNameTest, NameIsCaseInsensitive) {
  Result<TemplateFamily> f = FamilyFromName("ChatML");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, TemplateFamily::kChatml);
  ASSERT_TRUE(FamilyFromName("LLAMA3").ok());
}

TEST(FamilyNameTest, UnknownNameListsValidNames) {
  Result<TemplateFamily> f = FamilyFromName("llama2");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kInvalidArgument);
  const std::string& msg = f.status().message();
  EXPECT_NE(msg.find("\"llama2\""), std::string::npos) << msg;
  for (const char* name :
       {"chatml", "qwen3", "qwen3.5", "llama3", "mistral", "gemma", "phi3", "harmony"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_FALSE(FamilyFromName("").ok());
}

TEST(RenderTest, ChatmlBasic) {
  const std::vector<ChatMessage> msgs = {{"system", "S", {}}, {"user", "U1", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kChatml, msgs),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(MustRender(TemplateFamily::kChatml, msgs, Opts(false)),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n");
}

TEST(RenderTest, Llama3BosTextOnlyWhenAsked) {
  const std::vector<ChatMessage> msgs = {{"user", "  Hi\n", {}}};
  const std::string body =
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(MustRender(TemplateFamily::kLlama3, msgs, Opts(true, false)), body);
  EXPECT_EQ(MustRender(TemplateFamily::kLlama3, msgs, Opts(true, true)),
            "<|begin_of_text|>" + body);
  EXPECT_EQ(BosText(TemplateFamily::kLlama3), "<|begin_of_text|>");
}

TEST(RenderTest, BosTextPerFamily) {
  const std::vector<ChatMessage> msgs = {{"user", "x", {}}};
  for (TemplateFamily f : kAllFamilies) {
    const std::string without = MustRender(f, msgs, Opts(true, false));
    const std::string with = MustRender(f, msgs, Opts(true, true));
    EXPECT_EQ(with, std::string(BosText(f)) + without) << FamilyName(f);
  }
  EXPECT_EQ(BosText(TemplateFamily::kChatml), "");
  EXPECT_EQ(BosText(TemplateFamily::kMistral), "<s>");
  EXPECT_EQ(BosText(TemplateFamily::kGemma), "<bos>");
}

TEST(RenderTest, MistralSystemGoesIntoFirstUserMessage) {
  const std::vector<ChatMessage> msgs = {
      {"system", "S", {}}, {"user", "U1", {}}, {"assistant", "A1", {}}, {"user", "U2", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kMistral, msgs),
            " [INST] S\n\nU1 [/INST] A1</s> [INST] U2 [/INST]");
}

TEST(RenderTest, GemmaUsesModelRoleAndMergesSystem) {
  const std::vector<ChatMessage> msgs = {
      {"system", "S", {}}, {"user", " U1 ", {}}, {"assistant", "A1\n", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kGemma, msgs),
            "<start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(RenderTest, Phi3SkipsEmptySystemAndWritesNoEos) {
  const std::vector<ChatMessage> msgs = {
      {"system", "", {}}, {"user", "U1", {}}, {"assistant", "A1", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kPhi3, msgs, Opts(false)),
            "<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n");
}

TEST(RenderTest, DeveloperRoleIsSystem) {
  const std::vector<ChatMessage> dev = {{"developer", "D", {}}, {"user", "U", {}}};
  const std::vector<ChatMessage> sys = {{"system", "D", {}}, {"user", "U", {}}};
  for (TemplateFamily f : kAllFamilies) {
    EXPECT_EQ(MustRender(f, dev), MustRender(f, sys)) << FamilyName(f);
  }
}

TEST(RenderTest, TrimStripsUnicodeWhitespaceLikePython) {
  // U+00A0, U+3000, U+2028 and \x1f are whitespace for Python's str.strip();
  // U+200B (zero-width space) is not.
  const std::vector<ChatMessage> msgs = {{"user", "\xc2\xa0\xe3\x80\x80 hi \x1f\xe2\x80\xa8", {}},
                                         {"assistant", "\xe2\x80\x8bkeep\xe2\x80\x8b", {}}};
  EXPECT_EQ(
      MustRender(TemplateFamily::kLlama3, msgs, Opts(false)),
      "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n\xe2\x80\x8bkeep\xe2\x80\x8b<|eot_id|>");
  const std::vector<ChatMessage> blank = {{"user", " \t\n\xc2\x85", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kGemma, blank, Opts(false)),
            "<start_of_turn>user\n<end_of_turn>\n");
  // Truncated UTF-8 at either end is kept as is.
  const std::vector<ChatMessage> broken = {{"user", "\xe3\x80 x \xc2", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kGemma, broken, Opts(false)),
            "<start_of_turn>user\n\xe3\x80 x \xc2<end_of_turn>\n");
}

TEST(RenderTest, Qwen3StripsThinkBeforeLastUserMessage) {
  const std::vector<ChatMessage> msgs = {
      {"user", "U1", {}}, {"assistant", "<think>\nplan\n</think>\n\nA1", {}}, {"user", "U2", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kQwen3, msgs),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n");
}

TEST(RenderTest, Qwen3FinalAssistantGetsThinkBlock) {
  const std::vector<ChatMessage> msgs = {{"user", "U1", {}}, {"assistant", "A1", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kQwen3, msgs, Opts(false)),
            "<|im_start|>user\nU1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA1<|im_end|>\n");
}

TEST(RenderTest, Qwen3EnableThinkingFalseClosesThinkBlock) {
  const std::vector<ChatMessage> msgs = {{"user", "U1", {}}};
  RenderOptions opt;
  opt.enable_thinking = false;
  EXPECT_EQ(MustRender(TemplateFamily::kQwen3, msgs, opt),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  opt.enable_thinking = true;
  EXPECT_EQ(MustRender(TemplateFamily::kQwen3, msgs, opt),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n");
  // Other families ignore the flag.
  opt.enable_thinking = false;
  EXPECT_EQ(MustRender(TemplateFamily::kChatml, msgs, opt),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n");
}

TEST(RenderTest, Qwen35GenerationPromptOpensThinkBlock) {
  const std::vector<ChatMessage> msgs = {{"user", "U1", {}}};
  const std::string head = "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n";
  RenderOptions opt;
  EXPECT_EQ(MustRender(TemplateFamily::kQwen35, msgs, opt), head + "<think>\n");
  opt.enable_thinking = true;
  EXPECT_EQ(MustRender(TemplateFamily::kQwen35, msgs, opt), head + "<think>\n");
  opt.enable_thinking = false;
  EXPECT_EQ(MustRender(TemplateFamily::kQwen35, msgs, opt), head + "<think>\n\n</think>\n\n");
  EXPECT_EQ(MustRender(TemplateFamily::kQwen35, msgs, Opts(false)),
            "<|im_start|>user\nU1<|im_end|>\n");
}

// Qwen3.5 trims every content and the reasoning; Qwen3 strips only newlines
// around the reasoning and leading newlines of a final reply.
TEST(RenderTest, Qwen35TrimsContentAndReasoning) {
  const std::vector<ChatMessage> msgs = {
      {"system", "  S\n", {}}, {"user", "\tU1 ", {}}, {"assistant", " A1\n", "\n R \n"}};
  EXPECT_EQ(MustRender(TemplateFamily::kQwen35, msgs, Opts(false)),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nR\n</think>\n\nA1<|im_end|>\n");
  EXPECT_EQ(MustRender(TemplateFamily::kQwen3, msgs, Opts(false)),
            "<|im_start|>system\n  S\n<|im_end|>\n<|im_start|>user\n\tU1 <|im_end|>\n"
            "<|im_start|>assistant\n<think>\n R \n</think>\n\n A1\n<|im_end|>\n");
}

// After the last user query Qwen3.5 gives every reply a think block, empty or
// not; Qwen3 only the last one and those with reasoning.
TEST(RenderTest, Qwen35EveryReplyAfterLastQueryGetsThinkBlock) {
  const std::vector<ChatMessage> msgs = {
      {"user", "U1", {}}, {"assistant", "A1", {}}, {"assistant", "A2", {}}};
  EXPECT_EQ(MustRender(TemplateFamily::kQwen35, msgs, Opts(false)),
            "<|im_start|>user\nU1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
  EXPECT_EQ(MustRender(TemplateFamily::kQwen3, msgs, Opts(false)),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
}

// Every rendered message starts with one of its family's markers, and so
// does the generation prompt where the family has one.
TEST(RenderTest, MessagesBeginWithTheFamilysMarkers) {
  const std::vector<ChatMessage> chat = {
      {"system", "notes", {}}, {"user", "hi", {}}, {"assistant", "yes", {}}, {"user", "and?", {}}};
  for (TemplateFamily f : kAllFamilies) {
    SCOPED_TRACE(std::string(FamilyName(f)));
    const MessageMarkers m = MessageStartMarkers(f);
    ASSERT_FALSE(m.texts.empty());
    auto count = [&](const std::string& text) {
      size_t n = 0;
      for (const std::string& marker : m.texts) {
        for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1))
          ++n;
      }
      return n;
    };
    auto without = Render(f, chat, Opts(false));
    auto with = Render(f, chat, Opts(true));
    ASSERT_TRUE(without.ok() && with.ok());
    // Mistral and Gemma merge the system prompt into the first user turn;
    // harmony writes its own system message before the system prompt's.
    const size_t messages = f == TemplateFamily::kMistral ? 2
                            : f == TemplateFamily::kGemma ? 3
                            : f == TemplateFamily::kHarmony ? 5
                                                            : 4;
    EXPECT_EQ(count(*without), messages) << *without;
    EXPECT_EQ(count(*with), messages + (m.in_generation_prompt ? 1 : 0)) << *with;
  }
}

TEST(RenderTest, EndOfTurnStrings) {
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kChatml).front(), "<|im_end|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kQwen3).front(), "<|im_end|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kQwen35).front(), "<|im_end|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kLlama3).front(), "<|eot_id|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kMistral).front(), "</s>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kGemma).front(), "<end_of_turn>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kPhi3).front(), "<|end|>");
  // Harmony's <|end|> ends a message of the reply, not the reply.
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kHarmony),
            (std::vector<std::string>{"<|return|>", "<|call|>"}));
}

TEST(RenderTest, HarmonyWritesItsSystemMessageAndTheFinalChannel) {
  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief.", {}}, {"user", "Hi", {}}, {"assistant", "Hello.", {}}};
  RenderOptions o = Opts(false);
  o.current_date = "2026-01-15";
  const std::string system =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: 2026-01-15\n\nReasoning: medium\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every "
      "message.<|end|>";
  const std::string chat =
      "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
      "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello.";
  // The chat ends with the reply: <|return|>; a generation prompt follows an <|end|>.
  EXPECT_EQ(MustRender(TemplateFamily::kHarmony, msgs, o), system + chat + "<|return|>");
  o.add_generation_prompt = true;
  EXPECT_EQ(MustRender(TemplateFamily::kHarmony, msgs, o),
            system + chat + "<|end|><|start|>assistant");
  // No date: the line is left out; the reasoning effort is the caller's.
  RenderOptions high = Opts(true);
  high.reasoning_effort = "high";
  const std::string r = MustRender(TemplateFamily::kHarmony, {{"user", "Hi", {}}}, high);
  EXPECT_NE(r.find("Knowledge cutoff: 2024-06\nReasoning: high\n\n"), std::string::npos) << r;
  EXPECT_EQ(r.find("developer"), std::string::npos) << r;
}

TEST(RenderTest, HarmonyDropsAnEmptySystemPromptAndLaterSystemMessages) {
  const std::vector<ChatMessage> msgs = {
      {"system", "", {}}, {"user", "U1", {}}, {"system", "late", {}}, {"user", "U2", {}}};
  const std::string r = MustRender(TemplateFamily::kHarmony, msgs, Opts(true));
  EXPECT_EQ(r.find("developer"), std::string::npos) << r;
  EXPECT_EQ(r.find("late"), std::string::npos) << r;
  EXPECT_TRUE(r.ends_with("<|start|>user<|message|>U1<|end|><|start|>user<|message|>U2<|end|>"
                          "<|start|>assistant"))
      << r;
}

// ---------------------------------------------------------------------------
// Errors.

TEST(RenderErrorTest, EmptyListIsRejected) {
  for (TemplateFamily f : kAllFamilies) {
    Result<std::string> r = Render(f, {}, RenderOptions{});
    ASSERT_FALSE(r.ok()) << FamilyName(f);
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("empty"), std::string::npos);
  }
}

TEST(RenderErrorTest, UnknownRoleNamesIndexAndRole) {
  const std::vector<ChatMessage> msgs = {{"user", "U", {}}, {"tool", "42", {}}};
  for (TemplateFamily f : kAllFamilies) {
    Result<std::string> r = Render(f, msgs, RenderOptions{});
    ASSERT_FALSE(r.ok()) << FamilyName(f);
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("message 1"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("\"tool\""), std::string::npos) << r.status().message();
  }
}

TEST(RenderErrorTest, AlternationNamesTheMessage) {
  const std::vector<ChatMessage> two_users = {
      {"system", "S", {}}, {"user", "U1", {}}, {"user", "U2", {}}};
  for (TemplateFamily f : {TemplateFamily::kMistral, TemplateFamily::kGemma}) {
    Result<std::string> r = Render(f, two_users, RenderOptions{});
    ASSERT_FALSE(r.ok()) << FamilyName(f);
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("message 2"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("\"assistant\" was expected"), std::string::npos);
  }
  // The families without the rule render the same list.
  for (TemplateFamily f : {TemplateFamily::kChatml, TemplateFamily::kQwen3, TemplateFamily::kLlama3,
                           TemplateFamily::kPhi3}) {
    EXPECT_TRUE(Render(f, two_users, RenderOptions{}).ok()) << FamilyName(f);
  }
}

TEST(RenderErrorTest, FirstTurnMustBeUser) {
  const std::vector<ChatMessage> msgs = {{"assistant", "A0", {}}, {"user", "U1", {}}};
  Result<std::string> r = Render(TemplateFamily::kGemma, msgs, RenderOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("message 0"), std::string::npos) << r.status().message();
}

TEST(RenderErrorTest, SystemOnlyAtIndexZero) {
  const std::vector<ChatMessage> msgs = {
      {"user", "U1", {}}, {"assistant", "A1", {}}, {"system", "S", {}}, {"user", "U2", {}}};
  Result<std::string> r = Render(TemplateFamily::kMistral, msgs, RenderOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("message 2 is a system message"), std::string::npos)
      << r.status().message();
}

TEST(RenderErrorTest, Qwen35SystemOnlyAtIndexZero) {
  for (const char* role : {"system", "developer"}) {
    const std::vector<ChatMessage> msgs = {
        {"user", "U1", {}}, {"assistant", "A1", {}}, {role, "S", {}}, {"user", "U2", {}}};
    Result<std::string> r = Render(TemplateFamily::kQwen35, msgs, RenderOptions{});
    ASSERT_FALSE(r.ok()) << role;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("message 2 is a system message"), std::string::npos)
        << r.status().message();
    // Qwen3 renders it in place.
    EXPECT_TRUE(Render(TemplateFamily::kQwen3, msgs, RenderOptions{}).ok()) << role;
  }
}

// Qwen3.5 raises "No user query found in messages." when no user message is a
// query; a tool response counts as none, even with whitespace around it.
TEST(RenderErrorTest, Qwen35NeedsAUserQuery) {
  const std::vector<std::vector<ChatMessage>> no_query = {
      {{"system", "S", {}}},
      {{"assistant", "A0", {}}},
      {{"user", " <tool_response>x</tool_response>\n", {}}, {"assistant", "a", {}}},
  };
  for (const std::vector<ChatMessage>& msgs : no_query) {
    Result<std::string> r = Render(TemplateFamily::kQwen35, msgs, RenderOptions{});
    ASSERT_FALSE(r.ok()) << msgs[0].content;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("no user query"), std::string::npos)
        << r.status().message();
    EXPECT_TRUE(Render(TemplateFamily::kQwen3, msgs, RenderOptions{}).ok()) << msgs[0].content;
  }
}

// gpt-oss's template raises on a reply passed back with its channel headers.
TEST(RenderErrorTest, HarmonyRefusesChannelTagsInAnAssistantsContent) {
  const std::vector<ChatMessage> msgs = {
      {"user", "U1", {}},
      {"assistant", "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final"
                    "<|message|>A1", {}},
      {"user", "U2", {}}};
  Result<std::string> r = Render(TemplateFamily::kHarmony, msgs, RenderOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("message 1"), std::string::npos) << r.status().message();
}

// The official templates would silently drop the system prompt here; we refuse.
TEST(RenderErrorTest, SystemWithoutUserIsRejectedWhereItMerges) {
  const std::vector<ChatMessage> msgs = {{"system", "S", {}}};
  for (TemplateFamily f : {TemplateFamily::kMistral, TemplateFamily::kGemma}) {
    Result<std::string> r = Render(f, msgs, RenderOptions{});
    ASSERT_FALSE(r.ok()) << FamilyName(f);
    EXPECT_NE(r.status().message().find("message 0"), std::string::npos);
  }
  EXPECT_TRUE(Render(TemplateFamily::kChatml, msgs, RenderOptions{}).ok());
}

// ---------------------------------------------------------------------------
// Prefix property (see chat_template.h).

// u1, a1, u2, a2, u3, a3 with a system prompt; replies have no surrounding
// whitespace and no <think> block.
std::vector<ChatMessage> Conversation() {
  return {{"system", "You are terse.", {}},
          {"user", "What is 2+2?", {}},
          {"assistant", "4.", {}},
          {"user", "And 3+3?\nExplain.", {}},
          {"assistant", "6, because\n3+3 = 6.", {}},
          {"user", "Thanks!", {}},
          {"assistant", "You're welcome.", {}}};
}

// Messages [0, n) of `all`.
std::vector<ChatMessage> Head(const std::vector<ChatMessage>& all, size_t n) {
  return std::vector<ChatMessage>(all.begin(), all.begin() + static_cast<ptrdiff_t>(n));
}

// (A) R(..uk, ak; gen=false) is a prefix of R(..uk, ak, u(k+1); gen) for both gen.
void ExpectPropertyA(TemplateFamily f, const std::vector<ChatMessage>& conv, bool holds) {
  for (size_t end_a = 3; end_a + 1 < conv.size(); end_a += 2) {  // conv[end_a-1] is a reply
    const std::string with_reply = MustRender(f, Head(conv, end_a), Opts(false, true));
    for (bool gen : {false, true}) {
      const std::string next = MustRender(f, Head(conv, end_a + 1), Opts(gen, true));
      EXPECT_EQ(StartsWith(next, with_reply), holds)
          << FamilyName(f) << " k=" << end_a << "\n--- with reply:\n"
          << with_reply << "\n--- next turn:\n"
          << next;
    }
  }
}

// (B) R(..uk; gen=true) + lead + ak + EndOfTurnStrings[0] is a prefix of R(..u(k+1)).
// (C) R(..uk; gen=true) alone is a prefix of R(..u(k+1)).
void ExpectPropertiesBC(TemplateFamily f, const std::vector<ChatMessage>& conv,
                        const RenderOptions& gen_opt, const std::string& lead, bool b_holds,
                        bool c_holds) {
  const std::string eot = EndOfTurnStrings(f).front();
  for (size_t end_u = 2; end_u + 2 < conv.size(); end_u += 2) {  // conv[end_u-1] is a user turn
    const std::string prompt = MustRender(f, Head(conv, end_u), gen_opt);
    const std::string next = MustRender(f, Head(conv, end_u + 2), gen_opt);
    const std::string continued = prompt + lead + conv[end_u].content + eot;
    EXPECT_EQ(StartsWith(next, continued), b_holds)
        << FamilyName(f) << " k=" << end_u << "\n--- prompt+reply:\n"
        << continued << "\n--- next turn:\n"
        << next;
    EXPECT_EQ(StartsWith(next, prompt), c_holds) << FamilyName(f) << " k=" << end_u;
  }
}

TEST(PrefixPropertyTest, HoldsForEveryFamilyExceptTheQwenThinkingOnesAndHarmony) {
  const std::vector<ChatMessage> conv = Conversation();
  for (TemplateFamily f : kAllFamilies) {
    // qwen3 and qwen3.5 give a final reply a think block that later turns
    // drop; harmony ends it with <|return|>, later turns with <|end|>.
    const bool harmony = f == TemplateFamily::kHarmony;
    const bool qwen = f == TemplateFamily::kQwen3 || f == TemplateFamily::kQwen35;
    ExpectPropertyA(f, conv, /*holds=*/!qwen && !harmony);
    // Mistral writes " " + reply in the history; its prompt ends with " [/INST]".
    const std::string lead = f == TemplateFamily::kMistral ? " " : "";
    // qwen3.5's generation prompt opens a think block that the history lacks;
    // harmony's history writes the reply in the final channel, closed by
    // <|end|>, which is none of its end-of-turn strings.
    const bool qwen35 = f == TemplateFamily::kQwen35;
    ExpectPropertiesBC(f, conv, Opts(true, true), lead, /*b_holds=*/!qwen35 && !harmony,
                       /*c_holds=*/!qwen35);
  }
}

// Harmony: the prompt, then the reply as the history keeps it (its final
// message, closed by <|end|>), is a prefix of the next turn.
TEST(PrefixPropertyTest, HarmonyHistoryKeepsTheFinalMessage) {
  RenderOptions o = Opts(true);
  o.current_date = "2026-01-15";
  const std::vector<ChatMessage> conv = Conversation();
  ExpectPropertiesBC(TemplateFamily::kHarmony, conv, o, "<|channel|>final<|message|>",
                     /*b_holds=*/false, /*c_holds=*/true);
  for (size_t end_u = 2; end_u + 2 < conv.size(); end_u += 2) {
    const std::string prompt = MustRender(TemplateFamily::kHarmony, Head(conv, end_u), o);
    const std::string next = MustRender(TemplateFamily::kHarmony, Head(conv, end_u + 2), o);
    EXPECT_TRUE(
        StartsWith(next, prompt + "<|channel|>final<|message|>" + conv[end_u].content + "<|end|>"))
        << next;
  }
}

TEST(PrefixPropertyTest, MistralReplyWithoutLeadingSpaceIsNotAPrefix) {
  ExpectPropertiesBC(TemplateFamily::kMistral, Conversation(), Opts(true, true), "",
                     /*b_holds=*/false, /*c_holds=*/true);
}

// Trimming families: a reply with surrounding whitespace is stored trimmed.
TEST(PrefixPropertyTest, TrimmedFamiliesNeedTrimmedReplies) {
  std::vector<ChatMessage> conv = Conversation();
  conv[2].content = "4.\n";
  conv[4].content = "\n6.";
  for (TemplateFamily f : {TemplateFamily::kLlama3, TemplateFamily::kGemma}) {
    ExpectPropertyA(f, conv, true);
    ExpectPropertiesBC(f, conv, Opts(true), "", /*b_holds=*/false, /*c_holds=*/true);
  }
  for (TemplateFamily f : {TemplateFamily::kChatml, TemplateFamily::kPhi3}) {
    ExpectPropertiesBC(f, conv, Opts(true), "", /*b_holds=*/true, /*c_holds=*/true);
  }
}

// Qwen3 with <think> blocks in the replies: the history drops them, so only the
// prompt through the generation prompt is shared with the next turn.
TEST(PrefixPropertyTest, Qwen3ThinkBlocksBreakBButNotC) {
  std::vector<ChatMessage> conv = Conversation();
  conv[2].content = "<think>\nadd\n</think>\n\n4.";
  conv[4].content = "<think>\nadd again\n</think>\n\n6.";
  ExpectPropertiesBC(TemplateFamily::kQwen3, conv, Opts(true), "", /*b_holds=*/false,
                     /*c_holds=*/true);
  // What the next turn does contain: the reply without its think block.
  const std::string next = MustRender(TemplateFamily::kQwen3, Head(conv, 4), Opts(true));
  EXPECT_NE(next.find("<|im_start|>assistant\n4.<|im_end|>\n"), std::string::npos) << next;
  EXPECT_EQ(next.find("<think>"), std::string::npos) << next;
}

// enable_thinking=false: the generation prompt's empty think block is not part
// of the history, so even (C) breaks; the shared part ends at "assistant\n".
TEST(PrefixPropertyTest, Qwen3ThinkingOffBreaksC) {
  RenderOptions off = Opts(true);
  off.enable_thinking = false;
  const std::vector<ChatMessage> conv = Conversation();
  ExpectPropertiesBC(TemplateFamily::kQwen3, conv, off, "", /*b_holds=*/false, /*c_holds=*/false);
  const std::string prompt = MustRender(TemplateFamily::kQwen3, Head(conv, 2), off);
  const std::string next = MustRender(TemplateFamily::kQwen3, Head(conv, 4), off);
  const std::string shared =
      prompt.substr(0, prompt.size() - std::string("<think>\n\n</think>\n\n").size());
  EXPECT_TRUE(StartsWith(next, shared));
}

// Qwen3.5: P, the prompt less its generation prompt's think text (so it ends
// with "<|im_start|>assistant\n"), is a prefix of the next turn whatever
// enable_thinking is on either side (C'); with a trimmed reply that has no
// think block, so is P + reply + "<|im_end|>" (B').
TEST(PrefixPropertyTest, Qwen35NextTurnSharesThePromptLessItsThinkText) {
  const std::vector<ChatMessage> conv = Conversation();
  std::vector<RenderOptions> opts(3, Opts(true));
  opts[1].enable_thinking = true;
  opts[2].enable_thinking = false;
  const std::string eot = EndOfTurnStrings(TemplateFamily::kQwen35).front();
  for (const RenderOptions& prompt_opt : opts) {
    const std::string think =
        prompt_opt.enable_thinking == false ? "<think>\n\n</think>\n\n" : "<think>\n";
    for (const RenderOptions& next_opt : opts) {
      for (size_t end_u = 2; end_u + 2 < conv.size(); end_u += 2) {
        SCOPED_TRACE("k=" + std::to_string(end_u));
        const std::string prompt =
            MustRender(TemplateFamily::kQwen35, Head(conv, end_u), prompt_opt);
        ASSERT_TRUE(prompt.ends_with("<|im_start|>assistant\n" + think)) << prompt;
        const std::string p = prompt.substr(0, prompt.size() - think.size());
        const std::string next =
            MustRender(TemplateFamily::kQwen35, Head(conv, end_u + 2), next_opt);
        EXPECT_TRUE(StartsWith(next, p)) << next;
        EXPECT_TRUE(StartsWith(next, p + conv[end_u].content + eot)) << next;
        EXPECT_FALSE(StartsWith(next, prompt)) << next;
      }
    }
  }
}

// (B') needs the reply as the history keeps it: trimmed, and only the text
// after its last "</think>".
TEST(PrefixPropertyTest, Qwen35HistoryKeepsTheTrimmedAnswerOnly) {
  std::vector<ChatMessage> conv = Conversation();
  conv[2].content = "<think>\nadd\n</think>\n\n4.";
  conv[4].content = " 6.\n";
  const std::string eot = EndOfTurnStrings(TemplateFamily::kQwen35).front();
  const std::string think = "<think>\n";
  for (const auto& [end_u, kept] : {std::pair<size_t, std::string>{2, "4."}, {4, "6."}}) {
    const std::string prompt = MustRender(TemplateFamily::kQwen35, Head(conv, end_u), Opts(true));
    const std::string p = prompt.substr(0, prompt.size() - think.size());
    const std::string next = MustRender(TemplateFamily::kQwen35, Head(conv, end_u + 2), Opts(true));
    EXPECT_FALSE(StartsWith(next, p + conv[end_u].content + eot)) << next;
    EXPECT_TRUE(StartsWith(next, p + kept + eot)) << next;
  }
}

}  // namespace
}  // namespace mx::templates
