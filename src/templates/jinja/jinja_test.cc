#include <gtest/gtest.h>

#include "templates/jinja/template.h"

namespace mx::jinja {
namespace {

std::string Render(std::string_view src, const Value& ctx = Value::MakeDict({})) {
  auto t = Template::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->Render(ctx);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return *r;
}

TEST(JinjaTest, PrintsText) { EXPECT_EQ(Render("hello {{ 'world' }}"), "hello world"); }

}  // namespace
}  // namespace mx::jinja
