#include "toolcalls/tool_call_history.h"

#include <string>
#include <utility>
#include <vector>

#include "templates/jinja/json.h"

namespace mx::toolcalls {
namespace {

using jinja::Dict;
using jinja::Value;
using jinja::ValueList;

bool Has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// A copy of dict `d` with `key` set to `v`.
Value With(const Dict& d, std::string_view key, Value v) {
  Dict copy = d;
  copy.Set(Value::String(std::string(key)), std::move(v));
  return Value::FromDict(std::move(copy));
}

Value NormalizeArguments(const Value& args, bool want_string) {
  if (want_string && args.is_dict()) {
    auto text = jinja::ToJson(args);
    return text.ok() ? Value::String(*text) : args;
  }
  if (!want_string && args.is_string()) {
    auto parsed = jinja::ParseJson(args.as_string());
    if (parsed.ok() && parsed->is_dict()) return *parsed;
  }
  return args;
}

Value NormalizeCall(const Value& call, bool want_string) {
  if (!call.is_dict()) return call;
  const Value* fn = call.as_dict().Find("function");
  if (fn == nullptr || !fn->is_dict()) return call;
  const Value* args = fn->as_dict().Find("arguments");
  if (args == nullptr) return call;
  return With(call.as_dict(), "function",
              With(fn->as_dict(), "arguments", NormalizeArguments(*args, want_string)));
}

}  // namespace

HistoryForm DetectHistoryForm(std::string_view t) {
  HistoryForm f;
  // `... + tool['function']['arguments'] + ...` without an `is string` test.
  const bool concatenates =
      Has(t, "['arguments'] +") || Has(t, "['arguments'] }}") || Has(t, "['arguments']}}");
  const bool tests_string = Has(t, "['arguments'] is string") || Has(t, "arguments is string");
  f.string_arguments = concatenates && !tests_string;
  f.keep_null_content = Has(t, "== 'assistant' and message['content'] is none") ||
                        Has(t, "== 'assistant' and message['content'] is not none");
  f.reasoning_as_thinking = Has(t, "message.thinking") || Has(t, "message['thinking']") ||
                            Has(t, "message[\"thinking\"]");
  f.thinking_or_content = f.reasoning_as_thinking && Has(t, "message.content and message.thinking");
  return f;
}

Value NormalizeToolCallHistory(const Value& messages, HistoryForm form) {
  if (!messages.is_sequence()) return messages;
  ValueList out;
  out.reserve(messages.as_list().size());
  for (const Value& m : messages.as_list()) {
    if (!m.is_dict()) {
      out.push_back(m);
      continue;
    }
    Value msg = m;
    const Value* calls = m.Field("tool_calls");
    const bool has_calls = calls != nullptr && calls->is_sequence() && !calls->as_list().empty();
    const Value* role = m.Field("role");
    const Value* reasoning = m.Field("reasoning_content");
    if (form.reasoning_as_thinking && role != nullptr && role->is_string() &&
        role->as_string() == "assistant" && reasoning != nullptr && reasoning->is_string() &&
        !reasoning->as_string().empty() && m.as_dict().Find("thinking") == nullptr) {
      msg = With(msg.as_dict(), "thinking", *reasoning);
      if (form.thinking_or_content && has_calls) {
        msg = With(msg.as_dict(), "content", Value::String(""));
      }
    }
    if (has_calls) {
      ValueList new_calls;
      for (const Value& c : calls->as_list())
        new_calls.push_back(NormalizeCall(c, form.string_arguments));
      msg = With(msg.as_dict(), "tool_calls", Value::List(std::move(new_calls)));
      const Value* content = msg.as_dict().Find("content");
      if (!form.keep_null_content && content != nullptr && content->is_none()) {
        msg = With(msg.as_dict(), "content", Value::String(""));
      }
    }
    out.push_back(std::move(msg));
  }
  return Value::List(std::move(out));
}

}  // namespace mx::toolcalls
