#include "server/chat_choice.h"

namespace mx::server {

using Json = nlohmann::json;

ChatChoice::ChatChoice(const ChatChoiceOptions& options) : options_(options) {
  if (options.split_reasoning) {
    splitter_ = std::make_unique<ReasoningSplitter>(options.reasoning_starts_inside);
  }
  if (options.tool_format != toolcalls::ToolCallFormat::kNone) {
    tools_ = std::make_unique<toolcalls::ToolCallStream>(options.tool_format, options.tool_schemas,
                                                         options.parse_calls);
  }
}

std::vector<Json> ChatChoice::Deltas(const std::string& text) {
  std::string reasoning, content;
  if (splitter_) {
    splitter_->Feed(text, &reasoning, &content);
  } else {
    content = text;
  }
  std::vector<Json> out;
  Route(reasoning, content, /*final=*/false, &out);
  return out;
}

std::vector<Json> ChatChoice::Rest() {
  std::string reasoning, content;
  if (splitter_) splitter_->Finish(&reasoning, &content);
  std::vector<Json> out;
  Route(reasoning, content, /*final=*/true, &out);
  return out;
}

Json ChatChoice::Message(const std::string& text) {
  std::vector<Json> deltas = Deltas(text);
  for (Json& d : Rest()) deltas.push_back(std::move(d));
  std::string content, reasoning;
  Json calls = Json::array();
  for (const Json& d : deltas) {
    content += d.value("content", "");
    reasoning += d.value("reasoning_content", "");
    if (!d.contains("tool_calls")) continue;
    for (const Json& c : d["tool_calls"]) {
      const auto i = c["index"].get<size_t>();
      if (i >= calls.size()) {
        calls.push_back(
            {{"id", c.value("id", "")},
             {"type", "function"},
             {"function", {{"name", c["function"].value("name", "")}, {"arguments", ""}}}});
      }
      Json& args = calls[i]["function"]["arguments"];
      args = args.get<std::string>() + c["function"].value("arguments", "");
    }
  }
  Json m = {{"role", "assistant"}, {"content", content}};
  if (!calls.empty()) {
    if (content.empty()) m["content"] = nullptr;
    m["tool_calls"] = std::move(calls);
  }
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  return m;
}

void ChatChoice::Route(const std::string& reasoning, const std::string& content, bool final,
                       std::vector<Json>* out) {
  Json cur = Json::object();
  auto flush = [&] {
    if (!cur.empty()) out->push_back(std::move(cur));
    cur = Json::object();
  };
  auto add = [&](const char* key, const std::string& text) {
    if (!text.empty()) cur[key] = cur.value(key, "") + text;
  };
  add("reasoning_content", reasoning);
  if (!tools_) {
    add("content", content);
    flush();
    return;
  }
  std::vector<toolcalls::ToolCallEvent> events = tools_->Feed(content);
  if (final) {
    for (auto& e : tools_->Finish()) events.push_back(std::move(e));
  }
  using Kind = toolcalls::ToolCallEvent::Kind;
  for (const toolcalls::ToolCallEvent& e : events) {
    switch (e.kind) {
      case Kind::kContent:
        add("content", e.text);
        break;
      case Kind::kReasoning:
        add("reasoning_content", e.text);
        break;
      case Kind::kCallBegin: {
        flush();
        std::string id = e.id;
        if (id.empty()) {
          Result<std::string> made = toolcalls::MakeToolCallId(*options_.env, options_.tool_format);
          id = made.ok() ? *made : "call_" + std::to_string(e.index);
        }
        Json call = {{"index", e.index},
                     {"id", id},
                     {"type", "function"},
                     {"function", {{"name", e.text}, {"arguments", ""}}}};
        out->push_back({{"tool_calls", Json::array({std::move(call)})}});
        break;
      }
      case Kind::kArguments: {
        flush();
        Json part = {{"index", e.index}, {"function", {{"arguments", e.text}}}};
        out->push_back({{"tool_calls", Json::array({std::move(part)})}});
        break;
      }
    }
  }
  flush();
}

}  // namespace mx::server
