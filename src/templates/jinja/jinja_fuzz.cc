// libFuzzer entry point for the chat-template interpreter (tests/fuzz/README.md).
// The input is a template: it is parsed and, when accepted, rendered against
// two conversations (one with tools, tool calls, content parts and a null
// content; one minimal with `tools` undefined) under small limits, so that every
// limit is reachable. It aborts when a render returns more than the output
// limit or an error without the "chat template ..." location (other than the
// template's own raise_exception), and when one render takes more than 2 s of
// CPU (under max_steps = 100 000 a render does at most a few ms of work, so
// a slow one is work that no step paid for: an operation not charged by the
// bytes it touches); ASan and UBSan catch the rest.
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "templates/jinja/json.h"
#include "templates/jinja/template.h"

namespace {

using mx::jinja::Value;

constexpr std::string_view kRichContext = R"({
  "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris? <b>&amp;</b> \u00e9\u65e5\ud83d\ude00"},
    {"role": "assistant", "content": null, "reasoning_content": "think",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 2}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "<think>x</think>It is 21.5 C."},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}, {"type": "image"}]}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
  "documents": null, "enable_thinking": false, "n": 3, "f": 1.5
})";

constexpr std::string_view kMinimalContext = R"({
  "messages": [{"role": "user", "content": "hi"}],
  "add_generation_prompt": false, "bos_token": "", "eos_token": ""
})";

const Value& Context(std::string_view json) {
  auto v = mx::jinja::ParseJson(json);
  if (!v.ok()) std::abort();
  return *new Value(*v);
}

// CPU seconds of this thread (immune to the machine's other load).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void RenderOnce(const mx::jinja::Template& t, const Value& ctx) {
  mx::jinja::RenderOptions options;
  options.now = mx::jinja::DateTime{2026, 1, 15, 0, 0, 0};
  mx::jinja::RenderErrorInfo info;
  const double cpu0 = ThreadCpuSeconds();
  auto out = t.Render(ctx, options, &info);
  if (ThreadCpuSeconds() - cpu0 > 2.0) std::abort();  // unpaid work
  if (out.ok()) {
    if (out->size() > t.limits().max_output_bytes) std::abort();
    return;
  }
  const std::string& msg = out.status().message();
  if (!info.raised && msg.rfind("chat template line ", 0) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Value& rich = Context(kRichContext);
  static const Value& minimal = Context(kMinimalContext);
  mx::jinja::Limits limits;
  limits.max_source_bytes = 64 << 10;
  limits.max_output_bytes = 64 << 10;
  limits.max_steps = 100000;
  limits.max_items = 4096;
  limits.max_call_depth = 16;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = mx::jinja::Template::Parse(text, limits);
  if (!t.ok()) {
    if (t.status().message().rfind("chat template", 0) != 0) std::abort();
    return 0;
  }
  RenderOnce(*t, rich);
  RenderOnce(*t, minimal);
  return 0;
}
