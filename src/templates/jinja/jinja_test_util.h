// Helpers of the interpreter's unit tests (jinja_test.cc, jinja_limits_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "templates/jinja/json.h"
#include "templates/jinja/template.h"

namespace mx::jinja {

inline Value Json(std::string_view text) {
  auto v = ParseJson(text);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : Value::MakeDict({});
}

// Renders `src` with `ctx` (JSON); returns the output, or "ERROR: <message>".
inline std::string Render(std::string_view src, std::string_view ctx = "{}", const Limits& limits = {}) {
  auto t = Template::Parse(src, limits);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  RenderOptions options;
  options.now = DateTime{2026, 1, 15, 9, 5, 0};
  auto r = t->Render(Json(ctx), options);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return *r;
}

inline Status RenderStatus(std::string_view src, const Limits& limits = {}, std::string_view ctx = "{}") {
  auto t = Template::Parse(src, limits);
  if (!t.ok()) return t.status();
  return t->Render(Json(ctx)).status();
}

}  // namespace mx::jinja
