#include "server/api_output.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mx::server {
namespace {

using Json = nlohmann::json;

void ExpectBad(const Status& st, const std::string& needle) {
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

Result<ResponseFormat> Format(const char* body) {
  ResponseFormat f;
  MX_RETURN_IF_ERROR(ParseResponseFormat(nlohmann::ordered_json::parse(body), &f));
  return f;
}

Result<ToolOptions> Tools(const char* body) {
  ToolOptions t;
  MX_RETURN_IF_ERROR(ParseToolOptions(nlohmann::ordered_json::parse(body), &t));
  return t;
}

TEST(ResponseFormatTest, TheOpenAiFormsAndLlamaCppsFields) {
  EXPECT_EQ(Format(R"({})")->kind, ResponseFormat::Kind::kText);
  EXPECT_EQ(Format(R"({"response_format":{"type":"text"}})")->kind, ResponseFormat::Kind::kText);
  EXPECT_EQ(Format(R"({"response_format":{"type":"json_object"}})")->kind,
            ResponseFormat::Kind::kJsonObject);
  auto s =
      Format(R"({"response_format":{"type":"json_schema","json_schema":{"name":"w","strict":true,
      "schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(s->name, "w");
  EXPECT_EQ(s->schema["properties"]["a"]["type"], "integer");
  auto ls = Format(R"({"response_format":{"type":"json_object","schema":{"type":"array"}}})");
  EXPECT_EQ(ls->kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(Format(R"({"json_schema":{"type":"string"}})")->kind,
            ResponseFormat::Kind::kJsonSchema);
  auto g = Format(R"({"grammar":"root ::= \"yes\" | \"no\""})");
  EXPECT_EQ(g->kind, ResponseFormat::Kind::kGrammar);
  EXPECT_EQ(g->grammar, "root ::= \"yes\" | \"no\"");
  EXPECT_EQ(Format(R"({"grammar":""})")->kind, ResponseFormat::Kind::kText);
}

TEST(ResponseFormatTest, BadValuesNameTheField) {
  ExpectBad(Format(R"({"response_format":{"type":"xml"}})").status(),
            "'response_format.type' is 'xml'");
  ExpectBad(Format(R"({"response_format":"json"})").status(),
            "'response_format' must be an object");
  ExpectBad(Format(R"({"response_format":{}})").status(), "'response_format.type' is required");
  ExpectBad(Format(R"({"response_format":{"type":"json_schema"}})").status(),
            "'response_format.json_schema' is required");
  ExpectBad(
      Format(R"({"response_format":{"type":"json_schema","json_schema":{"schema":7}}})").status(),
      "'response_format.json_schema.schema' must be an object");
  ExpectBad(Format(R"({"grammar":7})").status(), "'grammar' must be a string");
  ExpectBad(Format(R"({"json_schema":"x"})").status(), "'json_schema' must be an object");
  ExpectBad(
      Format(R"({"grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})").status(),
      "at most one of");
}

TEST(ToolOptionsTest, ToolsAndChoices) {
  auto t = Tools(R"({"tools":[{"type":"function","function":{"name":"get_weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
      {"type":"function","function":{"name":"now"}}],"tool_choice":"required","parallel_tool_calls":false})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->tools.size(), 2u);
  EXPECT_EQ(t->tools[0].name, "get_weather");
  EXPECT_EQ(t->tools[0].parameters["properties"]["city"]["type"], "string");
  EXPECT_EQ(t->tools[1].parameters, nlohmann::ordered_json::object());
  EXPECT_EQ(t->choice, ToolChoice::kRequired);
  EXPECT_FALSE(t->parallel);
  EXPECT_TRUE(t->active());
  auto named = Tools(R"({"tools":[{"type":"function","function":{"name":"now"}}],
      "tool_choice":{"type":"function","function":{"name":"now"}}})");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->choice, ToolChoice::kNamed);
  EXPECT_EQ(named->named, "now");
  auto none =
      Tools(R"({"tools":[{"type":"function","function":{"name":"now"}}],"tool_choice":"none"})");
  EXPECT_FALSE(none->active());
  EXPECT_FALSE(Tools(R"({})")->active());
}

TEST(ToolOptionsTest, BadToolsNameTheField) {
  ExpectBad(Tools(R"({"tools":{}})").status(), "'tools' must be an array");
  ExpectBad(Tools(R"({"tools":[{"type":"code_interpreter"}]})").status(), "'tools[0].type'");
  ExpectBad(Tools(R"({"tools":[{"type":"function"}]})").status(),
            "'tools[0].function' is required");
  ExpectBad(Tools(R"({"tools":[{"type":"function","function":{"name":""}}]})").status(),
            "'tools[0].function.name'");
  ExpectBad(Tools(R"({"tools":[{"function":{"name":"a"}},{"function":{"name":"a"}}]})").status(),
            "'a' is given twice");
  ExpectBad(Tools(R"({"tools":[{"function":{"name":"a","parameters":[]}}]})").status(),
            "'tools[0].function.parameters' must be an object");
  ExpectBad(Tools(R"({"tools":[{"function":{"name":"a"}}],"tool_choice":"sometimes"})").status(),
            "'tool_choice' is 'sometimes'");
  ExpectBad(Tools(R"({"tools":[{"function":{"name":"a"}}],
      "tool_choice":{"type":"function","function":{"name":"b"}}})")
                .status(),
            "names 'b', which is not among 'tools'");
  ExpectBad(Tools(R"({"tool_choice":"required"})").status(), "'tools' is empty");
  ExpectBad(Tools(R"({"tools":[{"function":{"name":"a"}}],"parallel_tool_calls":"yes"})").status(),
            "'parallel_tool_calls' must be a boolean");
}

TEST(LogitBiasTest, ObjectAndArrayForms) {
  std::vector<std::pair<int32_t, float>> b;
  ASSERT_TRUE(
      ParseLogitBias(Json::parse(R"({"logit_bias":{"15":-5.5,"7":100,"9":-100}})"), &b).ok());
  ASSERT_EQ(b.size(), 3u);
  std::sort(b.begin(), b.end());
  EXPECT_EQ(b[0], (std::pair<int32_t, float>{7, 100.0f}));
  EXPECT_TRUE(std::isinf(b[1].second) && b[1].second < 0);  // -100 bans
  EXPECT_EQ(b[2], (std::pair<int32_t, float>{15, -5.5f}));
  b.clear();
  ASSERT_TRUE(ParseLogitBias(Json::parse(R"({"logit_bias":[[3,false],[4,2]]})"), &b).ok());
  ASSERT_EQ(b.size(), 2u);
  EXPECT_TRUE(std::isinf(b[0].second));
  EXPECT_EQ(b[1].second, 2.0f);
}

TEST(LogitBiasTest, BadBiasesNameTheField) {
  std::vector<std::pair<int32_t, float>> b;
  ExpectBad(ParseLogitBias(Json::parse(R"({"logit_bias":{"x":1}})"), &b), "keys must be token ids");
  ExpectBad(ParseLogitBias(Json::parse(R"({"logit_bias":{"1":101}})"), &b),
            "must be in [-100, 100]");
  ExpectBad(ParseLogitBias(Json::parse(R"({"logit_bias":{"1":true}})"), &b), "not true");
  ExpectBad(ParseLogitBias(Json::parse(R"({"logit_bias":[[1]]})"), &b),
            "'logit_bias[0]' must be [token id, bias]");
  ExpectBad(ParseLogitBias(Json::parse(R"({"logit_bias":"x"})"), &b),
            "'logit_bias' must be an object");
  ExpectBad(ParseLogitBias(Json::parse(R"({"logit_bias":{"99999999999":1}})"), &b),
            "keys must be token ids");
}

}  // namespace
}  // namespace mx::server

namespace mx::server {
namespace {

TEST(OutputFieldsTest, SchemasKeepTheClientsKeyOrder) {
  ResponseFormat f;
  ToolOptions t;
  const std::string body = R"({"response_format":{"type":"json_schema","json_schema":{"schema":
      {"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}},
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"b":{"type":"string"},"a":{"type":"string"}}}}}]})";
  ASSERT_TRUE(ParseOutputFields(Json::parse(body), body, &f, &t).ok());
  std::vector<std::string> keys;
  for (const auto& [k, v] : f.schema["properties"].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha"}));
  keys.clear();
  for (const auto& [k, v] : t.tools[0].parameters["properties"].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"b", "a"}));
  // Without any of the fields the body is not read again; with one, a bad
  // value is refused as from the first parse.
  ResponseFormat none;
  EXPECT_TRUE(ParseOutputFields(Json::parse(R"({"messages":[]})"), "not json", &none, &t).ok());
  EXPECT_EQ(none.kind, ResponseFormat::Kind::kText);
  ExpectBad(ParseOutputFields(Json::parse(R"({"grammar":1})"), R"({"grammar":1})", &f, nullptr),
            "'grammar' must be a string");
}

}  // namespace
}  // namespace mx::server
