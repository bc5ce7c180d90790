// Renders every case of the jinja2 goldens (real chat templates rendered by
// Python jinja2 as transformers configures it; see the goldens' README.md) and
// requires byte-identical output, or a refusal for the error cases, with the
// template's own message for raise_exception.
//
// The goldens live outside the repository (MATRICXON_TEMPLATE_GOLDENS_DIR,
// default ../shared/templates beside the checkout); the test is skipped when
// they are absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "templates/jinja/json.h"
#include "templates/jinja/template.h"

namespace mx::jinja {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Value ToValue(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(j.get<uint64_t>()));
    case Json::value_t::number_float:
      return Value::Float(j.get<double>());
    case Json::value_t::string:
      return Value::String(j.get<std::string>());
    case Json::value_t::array: {
      ValueList items;
      for (const Json& e : j) items.push_back(ToValue(e));
      return Value::List(std::move(items));
    }
    case Json::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key(), ToValue(*it));
      return Value::MakeDict(std::move(items));
    }
    default:
      return Value();
  }
}

// The rendering context transformers' apply_chat_template passes (README:
// "Rendering context").
Value CaseContext(const Json& file, const Json& c) {
  Dict ctx;
  auto set = [&](const std::string& k, Value v) { ctx.Set(Value::String(k), std::move(v)); };
  set("messages", ToValue(c["messages"]));
  set("add_generation_prompt", ToValue(c["add_generation_prompt"]));
  set("bos_token", ToValue(file["bos_token"]));
  set("eos_token", ToValue(file["eos_token"]));
  set("tools", c.contains("tools") ? ToValue(c["tools"]) : Value::None());
  set("documents", Value::None());
  if (c.contains("extra_vars")) {
    for (auto it = c["extra_vars"].begin(); it != c["extra_vars"].end(); ++it) {
      set(it.key(), ToValue(*it));
    }
  }
  Dict out;
  std::vector<std::string> removed;
  if (c.contains("undefined_vars")) {
    for (const Json& n : c["undefined_vars"]) removed.push_back(n.get<std::string>());
  }
  for (const auto& [k, v] : ctx.items()) {
    if (std::find(removed.begin(), removed.end(), k.as_string()) == removed.end()) out.Set(k, v);
  }
  return Value::FromDict(std::move(out));
}

// Where two texts first differ, with a little context, for failure messages.
std::string DiffHint(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  Json hint = {{"at", i},
               {"want", want.substr(from, 120)},
               {"got", got.substr(from, 120)},
               {"want_len", want.size()},
               {"got_len", got.size()}};
  return hint.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::filesystem::path GoldensDir() { return MATRICXON_TEMPLATE_GOLDENS_DIR; }

std::vector<std::filesystem::path> GoldenFiles() {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(GoldensDir(), ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(JinjaGoldenTest, EveryCaseRendersAsJinja2) {
  const auto files = GoldenFiles();
  if (files.empty()) GTEST_SKIP() << "no goldens in " << GoldensDir();
  RenderOptions options;
  options.now = DateTime{2026, 1, 15, 0, 0, 0};
  int total = 0, passed = 0, errors_total = 0, error_messages_matched = 0;
  std::vector<std::string> failures;
  for (const auto& path : files) {
    const Json file = Json::parse(ReadFile(path));
    const std::string name = file["template_name"].get<std::string>();
    // Every golden renders within 1% of the default step budget
    // (docs/chat_templates.md, "Limits"), bytes touched included.
    Limits one_percent;
    one_percent.max_steps = Limits().max_steps / 100;
    auto tmpl = Template::Parse(file["template"].get<std::string>(), one_percent);
    for (const Json& c : file["cases"]) {
      ++total;
      const std::string id = name + "/" + c["id"].get<std::string>();
      if (!tmpl.ok()) {
        failures.push_back(id + ": parse failed: " + tmpl.status().ToString());
        continue;
      }
      RenderErrorInfo info;
      auto out = tmpl->Render(CaseContext(file, c), options, &info);
      if (c.contains("rendered")) {
        const std::string want = c["rendered"].get<std::string>();
        if (!out.ok()) {
          failures.push_back(id + ": render failed: " + out.status().ToString());
        } else if (*out != want) {
          failures.push_back(id + ": output differs: " + DiffHint(want, *out));
        } else {
          ++passed;
        }
        continue;
      }
      ++errors_total;
      const std::string want_error = c["error"].get<std::string>();
      const bool raised = c["error_type"] == "raise_exception";
      if (out.ok()) {
        failures.push_back(id + ": rendered, but jinja2 refused with " + want_error);
        continue;
      }
      if (raised && (!info.raised || out.status().message() != want_error)) {
        failures.push_back(id + ": want raise_exception '" + want_error + "', got " +
                           out.status().ToString());
        continue;
      }
      ++passed;
      const std::string& msg = out.status().message();
      if (msg == want_error ||
          (msg.size() > want_error.size() &&
           msg.compare(msg.size() - want_error.size(), want_error.size(), want_error) == 0)) {
        ++error_messages_matched;
      } else {
        std::printf("  note: %s: jinja2 says \"%s\", we say \"%s\"\n", id.c_str(),
                    want_error.c_str(), msg.c_str());
      }
    }
  }
  std::printf("jinja goldens: %d/%d cases pass (%zu files); %d/%d error messages match jinja2's\n",
              passed, total, files.size(), error_messages_matched, errors_total);
  for (size_t i = 0; i < failures.size() && i < 60; ++i) ADD_FAILURE() << failures[i];
  EXPECT_EQ(passed, total);
}

// ParseJson (what a server would use to build the context) reads every golden
// file exactly as an order-preserving JSON library does, key order included.
TEST(JinjaGoldenTest, ParseJsonMatchesReferenceParser) {
  const auto files = GoldenFiles();
  if (files.empty()) GTEST_SKIP() << "no goldens in " << GoldensDir();
  for (const auto& path : files) {
    const std::string text = ReadFile(path);
    auto parsed = ParseJson(text);
    ASSERT_TRUE(parsed.ok()) << path << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->Repr(), ToValue(Json::parse(text)).Repr()) << path;
  }
}

}  // namespace
}  // namespace mx::jinja
