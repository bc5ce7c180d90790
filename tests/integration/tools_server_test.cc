// Function calling and structured output over real HTTP: `matricxon serve`
// on synthetic models that carry real chat templates (Qwen 3: Hermes calls,
// Qwen 3.5: XML calls, Llama 3.1: JSON calls, gpt-oss: harmony channels).
// Synthetic weights say nothing
// useful, so calls are forced (tool_choice, or a grammar that writes one)
// and the checks are on what the server makes of them: message.tool_calls,
// delta.tool_calls, finish_reason, schema-valid JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <signal.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

namespace fs = std::filesystem;

const Json kTools = Json::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"Weather of a city",
   "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8},
                 "unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city","unit"]}}},
  {"type":"function","function":{"name":"search","description":"Search the web",
   "parameters":{"type":"object","properties":{"query":{"type":"string","maxLength":8},
                 "limit":{"type":"integer","minimum":1,"maximum":9}},"required":["query","limit"]}}}])");

// The models: name -> template file of ../shared/templates.
const std::map<std::string, std::string> kModels = {
    {"qwen3", "Qwen-Qwen3-0.6B.json"},
    {"qwen35", "Qwen3.5-4B.json"},
    {"llama31", "meta-llama-Llama-3.1-8B-Instruct.json"},
    {"gptoss", "openai-gpt-oss-120b.json"},
    {"chatml", ""}};

// A chat as an OpenAI client sends it after a tool call: the question, the
// call (arguments as a string, content null) and the tool's answer.
Json CallAndResultHistory() {
  return Json::parse(R"([
    {"role":"user","content":"What is the weather in Oslo?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\", \"unit\": \"celsius\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"{\"temp\": 3}"}])");
}

class ToolsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    dir_ = new std::string(TempDir("tools_server"));
    for (const auto& [name, file] : kModels) {
      std::string cmd =
          BinaryPath() + " make-model --quiet --out " + *dir_ + "/models/" + name + ".gguf";
      if (!file.empty()) {
        const Json golden =
            Json::parse(ReadFile(std::string(MATRICXON_REF_DIR) + "/../templates/" + file));
        const std::string t = *dir_ + "/" + name + ".jinja";
        std::ofstream(t) << golden["template"].get<std::string>();
        cmd += " --chat-template " + t;
      }
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    server_ = new ServerProcess();
    std::string error;
    ASSERT_TRUE(server_->Start({"--threads", "1", "--ctx-size", "2048", "--persist-prompt-cache",
                                "false", "--max-loaded-models", "5"},
                               {{"MATRICXON_MODELS_DIR", *dir_ + "/models"}}, *dir_ + "/server.log",
                               &error))
        << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static int port() { return server_->port(); }

  static Json Body(const std::string& model, bool tools = true) {
    Json b = {{"model", model},
              {"messages", {{{"role", "user"}, {"content", "What is the weather in Oslo?"}}}},
              {"max_tokens", 400},
              {"temperature", 0.8},
              {"seed", 11}};
    if (tools) b["tools"] = kTools;
    return b;
  }
  static Reply Chat(const Json& body) { return Post(port(), "/v1/chat/completions", body.dump()); }

  // The streamed reply put together: content, reasoning, calls (by index)
  // and finish; `order` lists the kind of each delta that carried text or a
  // call ('r' reasoning, 'c' content, 't' tool call).
  struct Streamed {
    std::string content, reasoning, order;
    Json calls = Json::array();
    std::string finish;
    bool done = false;
  };
  static Streamed Stream(Json body) {
    body["stream"] = true;
    Reply r = Chat(body);
    EXPECT_EQ(r.status, 200) << r.raw;
    Streamed s;
    for (const Json& e : ParseSse(r.raw, &s.done)) {
      if (!e.contains("choices") || e["choices"].empty()) continue;
      const Json& ch = e["choices"][0];
      const Json& d = ch["delta"];
      if (d.contains("content") && d["content"].is_string() &&
          !d["content"].get<std::string>().empty()) {
        s.content += d["content"].get<std::string>();
        s.order += 'c';
      }
      if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) {
        s.reasoning += d["reasoning_content"].get<std::string>();
        s.order += 'r';
      }
      if (d.contains("tool_calls")) {
        s.order += 't';
        for (const Json& c : d["tool_calls"]) {
          const size_t i = c["index"].get<size_t>();
          if (i >= s.calls.size()) {
            EXPECT_EQ(i, s.calls.size()) << "calls begin in order";
            EXPECT_TRUE(c.contains("id") && c["function"].contains("name")) << c.dump();
            s.calls.push_back(
                {{"id", c["id"]}, {"name", c["function"]["name"]}, {"arguments", ""}});
          }
          s.calls[i]["arguments"] =
              s.calls[i]["arguments"].get<std::string>() + c["function"].value("arguments", "");
        }
      }
      if (!ch["finish_reason"].is_null()) s.finish = ch["finish_reason"];
    }
    return s;
  }

  static std::string* dir_;
  static ServerProcess* server_;
};
std::string* ToolsServerTest::dir_ = nullptr;
ServerProcess* ToolsServerTest::server_ = nullptr;

void ExpectValidWeather(const Json& args_text) {
  ASSERT_TRUE(args_text.is_string()) << args_text.dump();
  const Json args = Json::parse(args_text.get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << args_text;
  ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << args_text;
  EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << args_text;
}

TEST_F(ToolsServerTest, ANamedToolIsCalledInEachModelsSyntaxWholeAndStreamed) {
  for (const char* model : {"qwen3", "qwen35", "llama31", "gptoss"}) {
    SCOPED_TRACE(model);
    Json body = Body(model);
    // Qwen 3.5 would think first (its prompt opens a think block; the call
    // comes after </think>), which random weights never end.
    body["chat_template_kwargs"] = {{"enable_thinking", false}};
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    body["parallel_tool_calls"] = false;
    Reply r = Chat(body);
    ASSERT_EQ(r.status, 200) << r.raw;
    const Json& choice = r.body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.raw;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.raw;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.raw;
    const Json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u) << call.dump();
    EXPECT_EQ(call["function"]["name"], "get_weather");
    ExpectValidWeather(call["function"]["arguments"]);

    const Streamed s = Stream(body);  // same seed: the same reply
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.finish, "tool_calls");
    EXPECT_EQ(s.content, "");
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0]["name"], "get_weather");
    EXPECT_EQ(s.calls[0]["arguments"], call["function"]["arguments"]);
  }
}

TEST_F(ToolsServerTest, RequiredCallsOneOfTheTools) {
  Json body = Body("qwen35");
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  body["tool_choice"] = "required";
  body["parallel_tool_calls"] = false;
  body["n"] = 2;
  Reply r = Chat(body);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["choices"].size(), 2u);
  for (const Json& choice : r.body["choices"]) {
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.raw;
    const std::string name = choice["message"]["tool_calls"][0]["function"]["name"];
    EXPECT_TRUE(name == "get_weather" || name == "search") << name;
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
  }
}

TEST_F(ToolsServerTest, AutoModeParsesTheCallTheModelWritesAndKeepsAMalformedOneAsContent) {
  // The grammar stands in for a model that decides to call a tool.
  Json body = Body("qwen3");
  body["grammar"] =
      R"(root ::= "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call>")";
  Reply r = Chat(body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& m = r.body["choices"][0]["message"];
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(m["content"], "Let me check.");
  ASSERT_EQ(m["tool_calls"].size(), 1u) << r.raw;
  EXPECT_EQ(Json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            Json::parse(R"({"city":"Oslo","unit":"celsius"})"));
  const Streamed s = Stream(body);
  EXPECT_EQ(s.content, "Let me check.");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.finish, "tool_calls");

  const std::string broken = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ";
  body["grammar"] = "root ::= \"" +
                    std::string("<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", ") +
                    "\\\"arguments\\\": {\\\"city\\\": \"";
  r = Chat(body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop") << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], broken);
  EXPECT_FALSE(r.body["choices"][0]["message"].contains("tool_calls")) << r.raw;
  EXPECT_EQ(Stream(body).content, broken);
}

// gpt-oss's own template and its harmony replies: the grammar stands in for
// a model that thinks in the analysis channel, then calls a tool in the
// commentary channel, and, once the tool answered, thinks again and answers
// in the final channel. The server splits them into reasoning_content,
// tool_calls and content, whole and streamed, and drops every marker.
// A real gpt-oss reply ends at <|call|> or <|return|> (end-of-generation
// tokens, whose text is not sent), so the replies here end there; the same
// replies with the marker in the text (a vocabulary where it is plain text,
// as in this synthetic model) parse the same.
TEST_F(ToolsServerTest, HarmonyChannelsBecomeReasoningToolCallsAndContentWholeAndStreamed) {
  const std::string thinking = "The user asks for the weather in Oslo. I should call get_weather.";
  const std::string call =
      "<|channel|>analysis<|message|>" + thinking +
      "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
      "<|constrain|>json<|message|>{\"city\": \"Oslo\", \"unit\": \"celsius\"}";
  for (const std::string end : {"", "<|call|>"}) {
    SCOPED_TRACE("the call ends with '" + end + "'");
    Json body = Body("gptoss");
    body["temperature"] = 0;
    body["grammar"] = "root ::= " + Json(call + end).dump();
    Reply r = Chat(body);
    ASSERT_EQ(r.status, 200) << r.raw;
    const Json& choice = r.body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.raw;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.raw;
    EXPECT_EQ(choice["message"]["reasoning_content"], thinking) << r.raw;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.raw;
    const Json& c = choice["message"]["tool_calls"][0];
    EXPECT_EQ(c["function"]["name"], "get_weather");
    EXPECT_EQ(Json::parse(c["function"]["arguments"].get<std::string>()),
              Json::parse(R"({"city":"Oslo","unit":"celsius"})"));

    const Streamed s = Stream(body);
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.finish, "tool_calls");
    EXPECT_EQ(s.reasoning, thinking);
    EXPECT_EQ(s.content, "");
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0]["name"], "get_weather");
    EXPECT_EQ(s.calls[0]["arguments"], c["function"]["arguments"]);
    // The reasoning streams in pieces as it is written, before the call.
    EXPECT_GT(s.order.find('t'), 1u) << s.order;
    EXPECT_EQ(s.order.find_first_not_of('r'), s.order.find('t')) << s.order;
  }

  // The next request, as an OpenAI client sends it: the call (arguments as a
  // string, content null) and the tool's answer. The template renders them
  // as harmony messages; the reply thinks, then answers in the final channel.
  Json body = Body("gptoss");
  body["messages"] = CallAndResultHistory();
  Reply t = Post(port(), "/apply-template", body.dump());
  ASSERT_EQ(t.status, 200) << t.raw;
  const std::string prompt = t.body["prompt"];
  EXPECT_NE(prompt.find("<|start|>assistant to=functions.get_weather<|channel|>commentary "
                        "json<|message|>{\"city\": \"Oslo\", \"unit\": \"celsius\"}<|call|>"
                        "<|start|>functions.get_weather to=assistant<|channel|>commentary"
                        "<|message|>\"{\\\"temp\\\": 3}\"<|end|><|start|>assistant"),
            std::string::npos)
      << prompt;
  EXPECT_TRUE(prompt.ends_with("<|start|>assistant")) << prompt;
  const std::string again = "The tool says 3 degrees.";
  const std::string answer = "It is 3 degrees Celsius in Oslo.";
  const std::string final_reply = "<|channel|>analysis<|message|>" + again +
                                  "<|end|><|start|>assistant<|channel|>final<|message|>" + answer;
  for (const std::string end : {"", "<|return|>"}) {
    SCOPED_TRACE("the answer ends with '" + end + "'");
    body["temperature"] = 0;
    body["grammar"] = "root ::= " + Json(final_reply + end).dump();
    Reply r = Chat(body);
    ASSERT_EQ(r.status, 200) << r.raw;
    const Json& choice = r.body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop") << r.raw;
    EXPECT_EQ(choice["message"]["content"], answer) << r.raw;
    EXPECT_EQ(choice["message"]["reasoning_content"], again) << r.raw;
    EXPECT_FALSE(choice["message"].contains("tool_calls")) << r.raw;

    const Streamed s = Stream(body);
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.finish, "stop");
    EXPECT_EQ(s.reasoning, again);
    EXPECT_EQ(s.content, answer);
    EXPECT_TRUE(s.calls.empty()) << s.calls.dump();
    // Reasoning first, then the answer, each in several pieces.
    const size_t first_content = s.order.find('c');
    EXPECT_GT(first_content, 1u) << s.order;
    EXPECT_EQ(s.order.find_first_not_of('r'), first_content) << s.order;
    EXPECT_EQ(s.order.find_first_not_of('c', first_content), std::string::npos) << s.order;
    EXPECT_GT(s.order.size() - first_content, 1u) << s.order;
  }
}

// A gpt-oss chat without tools, or with tool_choice "none", comes back split
// all the same: analysis -> reasoning_content, final -> content, whole and
// streamed. A call the model writes with no tools to call is not a call: its
// text stays content as written (no tool_calls, finish_reason "stop").
// reasoning_format "none" gives the text as written.
TEST_F(ToolsServerTest, HarmonyRepliesAreSplitWithoutToolsToo) {
  const std::string thinking = "Just answer.";
  const std::string answer = "Hello there.";
  const std::string reply = "<|channel|>analysis<|message|>" + thinking +
                            "<|end|><|start|>assistant<|channel|>final<|message|>" + answer;
  const std::string call =
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Oslo\", \"unit\": \"celsius\"}";
  struct Case {
    std::string text, content;
  };
  const Case cases[] = {{reply, answer},
                        {reply + "<|return|>", answer},
                        {"<|channel|>analysis<|message|>" + thinking + "<|end|>" + call + "<|call|>",
                         call}};
  for (const bool tools : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(tools ? "tool_choice none" : "no tools") + ": " + c.text);
      Json body = Body("gptoss", tools);
      if (tools) body["tool_choice"] = "none";
      body["temperature"] = 0;
      body["grammar"] = "root ::= " + Json(c.text).dump();
      Reply r = Chat(body);
      ASSERT_EQ(r.status, 200) << r.raw;
      const Json& choice = r.body["choices"][0];
      EXPECT_EQ(choice["finish_reason"], "stop") << r.raw;
      EXPECT_EQ(choice["message"]["content"], c.content) << r.raw;
      EXPECT_EQ(choice["message"]["reasoning_content"], thinking) << r.raw;
      EXPECT_FALSE(choice["message"].contains("tool_calls")) << r.raw;

      const Streamed s = Stream(body);
      EXPECT_TRUE(s.done);
      EXPECT_EQ(s.finish, "stop");
      EXPECT_EQ(s.reasoning, thinking);
      EXPECT_EQ(s.content, c.content);
      EXPECT_TRUE(s.calls.empty()) << s.calls.dump();
      // The reasoning first, then the content, each as it is written.
      const size_t first_content = s.order.find('c');
      EXPECT_GT(first_content, 1u) << s.order;
      EXPECT_EQ(s.order.find_first_not_of('r'), first_content) << s.order;
      EXPECT_EQ(s.order.find_first_not_of('c', first_content), std::string::npos) << s.order;
    }
  }
  Json body = Body("gptoss", false);
  body["temperature"] = 0;
  body["grammar"] = "root ::= " + Json(reply).dump();
  body["reasoning_format"] = "none";
  Reply r = Chat(body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], reply) << r.raw;
  EXPECT_FALSE(r.body["choices"][0]["message"].contains("reasoning_content")) << r.raw;
  const Streamed s = Stream(body);
  EXPECT_EQ(s.content, reply);
  EXPECT_EQ(s.reasoning, "");
}

// A past reply's reasoning_content (what this server answers) reaches each
// template under the name it reads: gpt-oss's `thinking`, so the analysis
// that led to a call is in the prompt, and Qwen 3's reasoning_content.
TEST_F(ToolsServerTest, PastReasoningReachesTheTemplateUnderTheNameItReads) {
  const std::string thinking = "The user asks for the weather in Oslo. I should call get_weather.";
  Json body = Body("gptoss");
  body["messages"] = CallAndResultHistory();
  body["messages"][1]["reasoning_content"] = thinking;
  Reply t = Post(port(), "/apply-template", body.dump());
  ASSERT_EQ(t.status, 200) << t.raw;
  EXPECT_NE(t.body["prompt"].get<std::string>().find(
                "<|start|>user<|message|>What is the weather in Oslo?<|end|><|start|>assistant"
                "<|channel|>analysis<|message|>" +
                thinking + "<|end|><|start|>assistant to=functions.get_weather<|channel|>"),
            std::string::npos)
      << t.raw;
  // With a preamble in the content too (the template takes one or the other,
  // and refuses both): the reasoning is the analysis.
  body["messages"][1]["content"] = "Let me check.";
  t = Post(port(), "/apply-template", body.dump());
  ASSERT_EQ(t.status, 200) << t.raw;
  EXPECT_NE(t.body["prompt"].get<std::string>().find("<|channel|>analysis<|message|>" + thinking),
            std::string::npos)
      << t.raw;
  body["max_tokens"] = 4;
  EXPECT_EQ(Chat(body).status, 200);

  body["model"] = "qwen3";
  body["messages"][1]["content"] = nullptr;
  t = Post(port(), "/apply-template", body.dump());
  ASSERT_EQ(t.status, 200) << t.raw;
  EXPECT_NE(t.body["prompt"].get<std::string>().find("<|im_start|>assistant\n<think>\n" + thinking +
                                                     "\n</think>\n\n<tool_call>"),
            std::string::npos)
      << t.raw;
}

// gpt-oss's template is recognised as the harmony family (message markers
// <|start|>, stop strings <|return|> and <|call|>), not ChatML's fallback.
TEST_F(ToolsServerTest, GptOssTemplateIsTheHarmonyFamily) {
  Json body = Body("gptoss", false);
  body["max_tokens"] = 1;
  ASSERT_EQ(Chat(body).status, 200);
  const std::string log = ReadFile(*dir_ + "/server.log");
  EXPECT_NE(log.find("loaded model gptoss from"), std::string::npos) << log;
  EXPECT_NE(log.find("chat template family harmony)"), std::string::npos) << log;
  EXPECT_EQ(log.find("gptoss.gguf: chat template family not recognised"), std::string::npos) << log;
}

TEST_F(ToolsServerTest, ToolChoiceNoneLeavesTheToolsOutOfThePrompt) {
  auto prompt_tokens = [&](Json body) {
    body["max_tokens"] = 1;
    Reply r = Chat(body);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body["usage"]["prompt_tokens"].get<int64_t>();
  };
  const int64_t without = prompt_tokens(Body("qwen3", false));
  EXPECT_GT(prompt_tokens(Body("qwen3")), without + 100);
  Json none = Body("qwen3");
  none["tool_choice"] = "none";
  EXPECT_EQ(prompt_tokens(none), without);
}

TEST_F(ToolsServerTest, AToolResultInTheHistoryIsRenderedWithTheCallItAnswers) {
  Json body = Body("qwen3");
  body["messages"] = CallAndResultHistory();
  Reply t = Post(port(), "/apply-template", body.dump());
  ASSERT_EQ(t.status, 200) << t.raw;
  const std::string prompt = t.body["prompt"];
  // The wire form (arguments as a string, content null) is rendered as the
  // template expects: the arguments object, not a JSON string of it.
  EXPECT_NE(
      prompt.find(R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}})"),
      std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<tool_response>\n{\"temp\": 3}\n</tool_response>"), std::string::npos)
      << prompt;
  body["max_tokens"] = 4;
  EXPECT_EQ(Chat(body).status, 200);
}

TEST_F(ToolsServerTest, ForcingACallNeedsASyntaxTheServerCanWrite) {
  Json body = Body("chatml");  // the default ChatML template has no tool-call syntax
  body["tool_choice"] = "required";
  Reply r = Chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("'tool_choice'"), std::string::npos) << r.raw;
  body = Body("qwen3");
  body["tool_choice"] = "required";
  body["response_format"] = {{"type", "json_object"}};
  r = Chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("cannot be combined"), std::string::npos) << r.raw;
}

// ---- Structured output ----

const Json kSchema = Json::parse(R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":6},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
  "required":["name","age"],"additionalProperties":false})");

void ExpectPerson(const Json& content) {
  ASSERT_TRUE(content.is_string()) << content;
  const Json v = Json::parse(content.get<std::string>(), nullptr, false);
  ASSERT_TRUE(v.is_object()) << content;
  ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << content;
  ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << content;
  EXPECT_GE(v["age"].get<int>(), 0);
  EXPECT_LE(v["age"].get<int>(), 120);
  for (const auto& [k, x] : v.items()) EXPECT_TRUE(k == "name" || k == "age" || k == "tags") << k;
}

TEST_F(ToolsServerTest, JsonSchemaRepliesAreValidWholeStreamedAndFromTheCache) {
  Json body = Body("qwen3", false);
  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"name", "person"}, {"schema", kSchema}}}};
  body["max_tokens"] = 200;
  body["n"] = 3;
  Reply r = Chat(body);
  ASSERT_EQ(r.status, 200) << r.raw;
  for (const Json& choice : r.body["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "stop") << r.raw;
    ExpectPerson(choice["message"]["content"]);
  }
  body["n"] = 1;
  body["temperature"] = 0;
  Reply cold = Chat(body);
  Reply warm = Chat(body);
  ASSERT_EQ(warm.status, 200);
  EXPECT_GT(warm.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(warm.body["choices"][0]["message"]["content"],
            cold.body["choices"][0]["message"]["content"]);
  ExpectPerson(cold.body["choices"][0]["message"]["content"]);
  const Streamed s = Stream(body);
  EXPECT_EQ(s.content, cold.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(s.finish, "stop");

  Json obj = Body("qwen3", false);
  obj["response_format"] = {{"type", "json_object"}};
  obj["max_tokens"] = 60;
  obj["grammar"] = nullptr;
  Reply o = Chat(obj);
  ASSERT_EQ(o.status, 200) << o.raw;
  if (o.body["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(
        Json::parse(o.body["choices"][0]["message"]["content"].get<std::string>(), nullptr, false)
            .is_object())
        << o.raw;
  } else {  // cut by max_tokens: a prefix of an object
    EXPECT_EQ(o.body["choices"][0]["message"]["content"].get<std::string>().rfind("{", 0), 0u)
        << o.raw;
  }
}

TEST_F(ToolsServerTest, GrammarAndSchemaErrorsNameTheProblem) {
  Json body = Body("qwen3", false);
  body["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}};
  Reply r = Chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("unsupported keyword 'pattern'"), std::string::npos) << r.raw;
  body.erase("response_format");
  body["grammar"] = "root ::= \"a\" undefined-rule";
  r = Chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("'grammar'"), std::string::npos) << r.raw;
  EXPECT_NE(r.raw.find("undefined-rule"), std::string::npos) << r.raw;
  Reply c = Post(
      port(), "/v1/completions",
      Json{{"model", "qwen3"}, {"prompt", "x"}, {"grammar", "root ::= \"yes\" | \"no\""}}.dump());
  ASSERT_EQ(c.status, 200) << c.raw;
  const std::string text = c.body["choices"][0]["text"];
  EXPECT_TRUE(text == "yes" || text == "no") << text;
}

// Hostile grammars through the server: a surrogate escape (would let
// through text that is not UTF-8) and a grammar that allows no text (once
// an empty "stop") are 400 naming the problem; a 100,000-value enum is
// refused before its grammar is built (it once took seconds of building).
TEST_F(ToolsServerTest, HostileGrammarsAreRefusedBeforeGenerating) {
  Json body = Body("qwen3", false);
  body["grammar"] = "root ::= \"\\uD800\"";
  Reply r = Chat(body);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("UTF-16 surrogate"), std::string::npos) << r.raw;
  body["grammar"] = "root ::= \"a\" x\nx ::= \"b\" x";
  r = Chat(body);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("the grammar allows no text"), std::string::npos) << r.raw;
  body.erase("grammar");
  Json values = Json::array();
  for (int i = 0; i < 100000; ++i) values.push_back("value-" + std::to_string(i));
  body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", {{"enum", values}}}}}};
  const auto t0 = std::chrono::steady_clock::now();
  r = Chat(body);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
  EXPECT_NE(r.raw.find("100000 values exceed the supported maximum of 16384"), std::string::npos)
      << r.raw.substr(0, 300);
  EXPECT_LT(seconds, 5.0) << "the enum was built before it was refused";
}

}  // namespace
}  // namespace mx::testing
