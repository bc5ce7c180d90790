#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "templates/chat_template.h"
#include "templates/testdata/official_templates.h"

namespace mx::templates {
namespace {

using json = nlohmann::json;
namespace td = testdata;

constexpr TemplateFamily kAllFamilies[] = {TemplateFamily::kChatml, TemplateFamily::kQwen3,
                                           TemplateFamily::kLlama3, TemplateFamily::kMistral,
                                           TemplateFamily::kGemma,  TemplateFamily::kPhi3};

json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream buf;
  buf << in.rdbuf();
  return json::parse(buf.str());
}

std::vector<ChatMessage> MessagesFromJson(const json& arr) {
  std::vector<ChatMessage> out;
  for (const json& m : arr) {
    ChatMessage msg{m.at("role").get<std::string>(), m.at("content").get<std::string>(), {}};
    if (m.contains("reasoning_content"))
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
    out.push_back(std::move(msg));
  }
  return out;
}

std::string MustRender(TemplateFamily f, const std::vector<ChatMessage>& msgs,
                       RenderOptions opt = {}) {
  Result<std::string> r = Render(f, msgs, opt);
  EXPECT_TRUE(r.ok()) << FamilyName(f) << ": " << r.status().ToString();
  return r.ok() ? r.value() : std::string();
}

RenderOptions Opts(bool gen, bool bos = false) {
  RenderOptions o;
  o.add_generation_prompt = gen;
  o.include_bos_text = bos;
  return o;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

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
  for (const char* name : {"chatml", "qwen3", "llama3", "mistral", "gemma", "phi3"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_FALSE(FamilyFromName("").ok());
}

TEST(DetectFamilyTest, ReferenceTokenizerTemplateIsChatml) {
  const json tok = ReadJson(std::string(MATRICXON_REF_DIR) + "/tokenizer.json");
  const std::string tmpl = tok.at("chat_template").get<std::string>();
  EXPECT_EQ(tmpl, td::kRenderChatmlRef);
  EXPECT_EQ(DetectFamily(tmpl), TemplateFamily::kChatml);
}

TEST(DetectFamilyTest, OfficialTemplates) {
  EXPECT_EQ(DetectFamily(td::kQwen25), TemplateFamily::kChatml);
  EXPECT_EQ(DetectFamily(td::kRenderQwen3), TemplateFamily::kQwen3);
  EXPECT_EQ(DetectFamily(td::kRenderLlama3), TemplateFamily::kLlama3);
  EXPECT_EQ(DetectFamily(td::kLlama31), TemplateFamily::kLlama3);
  EXPECT_EQ(DetectFamily(td::kRenderMistralV1), TemplateFamily::kMistral);
  EXPECT_EQ(DetectFamily(td::kMistralV01), TemplateFamily::kMistral);
  EXPECT_EQ(DetectFamily(td::kMistralV7), TemplateFamily::kMistral);
  EXPECT_EQ(DetectFamily(td::kGemma2), TemplateFamily::kGemma);
  EXPECT_EQ(DetectFamily(td::kRenderGemma3), TemplateFamily::kGemma);
  EXPECT_EQ(DetectFamily(td::kRenderPhi35), TemplateFamily::kPhi3);
  EXPECT_EQ(DetectFamily(td::kPhi3Mini), TemplateFamily::kPhi3);
}

TEST(DetectFamilyTest, OtherFamiliesAreNotRecognised) {
  EXPECT_EQ(DetectFamily(""), std::nullopt);
  EXPECT_EQ(DetectFamily(td::kPhi4), std::nullopt);        // <|im_start|> + <|im_sep|>
  EXPECT_EQ(DetectFamily(td::kZephyr), std::nullopt);      // <|user|> without <|end|>
  EXPECT_EQ(DetectFamily(td::kDeepseekR1), std::nullopt);  // <think> without <|im_start|>
  EXPECT_EQ(DetectFamily(td::kVicuna), std::nullopt);
  EXPECT_EQ(DetectFamily("{{ messages }}"), std::nullopt);
}

// ---------------------------------------------------------------------------
// Exact renderings.

// Every case of jinja_goldens.json: the official templates rendered by Python
// jinja2 as transformers does (see testdata/gen_goldens.py), with BOS text.
TEST(RenderTest, MatchesJinjaGoldens) {
  const json goldens =
      ReadJson(std::string(MATRICXON_SOURCE_DIR) + "/src/templates/testdata/jinja_goldens.json");
  size_t n_checked = 0;
  for (const json& c : goldens.at("cases")) {
    const std::string family_name = c.at("family").get<std::string>();
    Result<TemplateFamily> family = FamilyFromName(family_name);
    ASSERT_TRUE(family.ok()) << family_name;
    RenderOptions opt = Opts(c.at("add_generation_prompt").get<bool>(), /*bos=*/true);
    if (c.contains("enable_thinking")) opt.enable_thinking = c["enable_thinking"].get<bool>();
    SCOPED_TRACE(family_name + " / " + c.at("conversation").get<std::string>() +
                 " / gen=" + (opt.add_generation_prompt ? "1" : "0") + " / thinking=" +
                 (c.contains("enable_thinking") ? c["enable_thinking"].dump() : "unset"));
    const std::vector<ChatMessage> msgs =
        MessagesFromJson(goldens.at("conversations").at(c.at("conversation").get<std::string>()));
    Result<std::string> got = Render(*family, msgs, opt);
    if (c.contains("error")) {
      ASSERT_FALSE(got.ok()) << "expected an error like: " << c["error"];
      EXPECT_EQ(got.status().code(), Status::Code::kInvalidArgument);
    } else {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, c.at("expected").get<std::string>());
    }
    ++n_checked;
  }
  EXPECT_GE(n_checked, 200u);
}

TEST(RenderTest, ReferenceChatPromptByteForByte) {
  const json prompts = ReadJson(std::string(MATRICXON_REF_DIR) + "/prompts.json");
  std::vector<ChatMessage> msgs;
  for (const json& p : prompts) {
    if (p.at("name") == "chat") msgs = MessagesFromJson(p.at("messages"));
  }
  ASSERT_EQ(msgs.size(), 4u);
  const std::string rendered = MustRender(TemplateFamily::kChatml, msgs);
  for (const char* model : {"tiny-llama", "tiny-qwen3", "tiny-hybrid-nemotron_h"}) {
    const json ref = ReadJson(std::string(MATRICXON_REF_DIR) + "/ref-" + model + ".json");
    bool found = false;
    for (const json& p : ref.at("prompts")) {
      if (p.at("name") != "chat") continue;
      found = true;
      EXPECT_EQ(rendered, p.at("text").get<std::string>()) << model;
    }
    EXPECT_TRUE(found) << model;
  }
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

// Every rendered message starts with one of its family's markers, and so
// does the generation prompt where the family has one.
TEST(RenderTest, MessagesBeginWithTheFamilysMarkers) {
  const std::vector<ChatMessage> chat = {
      {"system", "notes", {}}, {"user", "hi", {}}, {"assistant", "yes", {}}, {"user", "and?", {}}};
  for (TemplateFamily f :
       {TemplateFamily::kChatml, TemplateFamily::kQwen3, TemplateFamily::kLlama3,
        TemplateFamily::kMistral, TemplateFamily::kGemma, TemplateFamily::kPhi3}) {
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
    auto without = Render(f, chat, {.add_generation_prompt = false});
    auto with = Render(f, chat, {.add_generation_prompt = true});
    ASSERT_TRUE(without.ok() && with.ok());
    const size_t messages = f == TemplateFamily::kMistral ? 2 : f == TemplateFamily::kGemma ? 3 : 4;
    EXPECT_EQ(count(*without), messages) << *without;
    EXPECT_EQ(count(*with), messages + (m.in_generation_prompt ? 1 : 0)) << *with;
  }
}

TEST(RenderTest, EndOfTurnStrings) {
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kChatml).front(), "<|im_end|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kQwen3).front(), "<|im_end|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kLlama3).front(), "<|eot_id|>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kMistral).front(), "</s>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kGemma).front(), "<end_of_turn>");
  EXPECT_EQ(EndOfTurnStrings(TemplateFamily::kPhi3).front(), "<|end|>");
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

TEST(PrefixPropertyTest, HoldsForEveryFamilyExceptQwen3A) {
  const std::vector<ChatMessage> conv = Conversation();
  for (TemplateFamily f : kAllFamilies) {
    ExpectPropertyA(f, conv, /*holds=*/f != TemplateFamily::kQwen3);
    // Mistral writes " " + reply in the history; its prompt ends with " [/INST]".
    const std::string lead = f == TemplateFamily::kMistral ? " " : "";
    ExpectPropertiesBC(f, conv, Opts(true, true), lead, /*b_holds=*/true, /*c_holds=*/true);
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

}  // namespace
}  // namespace mx::templates
