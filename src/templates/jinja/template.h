// A Jinja2 interpreter for chat templates, rendering them as Hugging Face
// transformers does (jinja2's ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True, loop controls, the {% generation %}
// tag, raise_exception, strftime_now and a tojson that keeps key order and
// non-ASCII text). docs/chat_templates.md lists the supported subset, the
// limits and the known differences from jinja2.
//
// Templates are untrusted input (they come inside GGUF files): parsing and
// rendering never crash, recurse without bound or run without bound; every
// failure is a Status naming the template line.
//
// Usage:
//   MX_ASSIGN_OR_RETURN(auto tmpl, jinja::Template::Parse(gguf_chat_template));
//   jinja::Value ctx = jinja::Value::MakeDict({
//       {"messages", messages}, {"add_generation_prompt", jinja::Value::Bool(true)},
//       {"bos_token", jinja::Value::String("<s>")}});
//   MX_ASSIGN_OR_RETURN(std::string prompt, tmpl.Render(ctx, options));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "templates/jinja/json.h"
#include "templates/jinja/value.h"

namespace mx::jinja {

struct Program;

// Bounds on what one template may cost. A template past a bound fails with
// ResourceExhausted (parse-time bounds: InvalidArgument).
struct Limits {
  // Template text larger than this is refused by Parse.
  size_t max_source_bytes = 1 << 20;
  // Nesting of blocks and expressions Parse accepts (bounds recursion).
  int max_nesting = 100;
  // Rendered text, and also the largest string a template may build.
  size_t max_output_bytes = 16 << 20;
  // Evaluation steps per render: one per statement, expression and loop
  // iteration, plus one per 16 bytes of every string an operation reads,
  // builds or prints (filters, tests, methods, operators, subscripts: the
  // bytes they touch) and one per 16 items of lists and dicts. A 30-turn
  // chat with tools takes well under 100 000.
  uint64_t max_steps = 20'000'000;
  // Macro calls nested deeper than this fail (recursive macros).
  int max_call_depth = 64;
  // Longest list or dict a template may build (range(), list * n, ...).
  size_t max_items = 1 << 20;
};

// A calendar time for strftime_now(); the caller reads its clock (through
// core::Env) and passes the local time here, so that rendering stays a pure
// function of its inputs.
struct DateTime {
  int year = 1970;
  int month = 1;  // 1..12
  int day = 1;    // 1..31
  int hour = 0;
  int minute = 0;
  int second = 0;
};

struct RenderOptions {
  // What strftime_now(format) formats (C locale).
  DateTime now;
  // Asked every 65 536 steps (a few ms) while rendering; true stops the
  // render with ResourceExhausted "rendering was stopped ..." (a client that
  // left, a deadline that passed). Empty: never stops early. Called on the
  // rendering thread.
  std::function<bool()> should_stop;
};

// Where a render failed (filled by Render on failure when asked for).
struct RenderErrorInfo {
  // The template called raise_exception(): the message is the template's own,
  // meant for the client ("Conversation roles must alternate ...").
  bool raised = false;
  // RenderOptions::should_stop stopped the render.
  bool stopped = false;
  int line = 0;  // 1-based template line of the failing statement or expression
};

class Template {
 public:
  // Parses `source` (UTF-8). Fails with InvalidArgument "chat template line N:
  // <what>" on a syntax error, an unknown tag or filter, invalid UTF-8, or a
  // template over `limits` (size, nesting); NotSupported for tags chat
  // templates cannot use ({% include %}, {% extends %}, ...).
  static Result<Template> Parse(std::string_view source, const Limits& limits = {});

  // Renders with `context` as the template's variables. REQUIRES: `context`
  // is a dict with string keys (Value::MakeDict). Names the context does not
  // give are undefined (jinja2's Undefined), so pass None explicitly where
  // transformers does (tools, documents).
  //
  // Errors:
  //   * raise_exception(msg) in the template: InvalidArgument whose message is
  //     exactly `msg` (what jinja2's TemplateError says);
  //   * any other template error (undefined value misused, type error,
  //     sandbox violation, unknown filter reached): InvalidArgument
  //     "chat template line N: <Python's message>";
  //   * a limit hit: ResourceExhausted "chat template line N: ...".
  // When `error_info` is given it says, on failure, which kind of error it was
  // and where. Thread-safe: a Template may be rendered from many threads at once.
  Result<std::string> Render(const Value& context, const RenderOptions& options = {},
                             RenderErrorInfo* error_info = nullptr) const;

  const Limits& limits() const { return limits_; }

 private:
  Template(std::shared_ptr<const Program> program, const Limits& limits)
      : program_(std::move(program)), limits_(limits) {}

  std::shared_ptr<const Program> program_;
  Limits limits_;
};

}  // namespace mx::jinja
