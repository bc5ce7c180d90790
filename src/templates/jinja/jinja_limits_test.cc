// Unit tests of the chat-template interpreter: errors naming the line, the
// limits that keep untrusted templates from hanging or exhausting the server,
// JSON in and out, and rendering from many threads.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "templates/jinja/jinja_test_util.h"
#include "templates/jinja/json.h"
#include "templates/jinja/template.h"

namespace mx::jinja {
namespace {

// ---- errors --------------------------------------------------------------------

TEST(JinjaErrorTest, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(Render("a\nb\n{% if x %}"),
            "PARSE ERROR: chat template line 3: Unexpected end of template. Jinja was looking for "
            "the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be "
            "closed is 'if'.");
  EXPECT_EQ(Render("{% for x in y %}{% endif %}"),
            "PARSE ERROR: chat template line 1: Encountered unknown tag 'endif'. Jinja was looking "
            "for the following tags: 'endfor' or 'else'. The innermost block that needs to be "
            "closed is 'for'.");
  EXPECT_EQ(Render("{{ 1 +"),
            "PARSE ERROR: chat template line 1: unexpected end of template, "
            "expected 'end of print statement'.");
}

TEST(JinjaErrorTest, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(
      Render("ok\n{% for m in messages %}\n{{ m + 1 }}{% endfor %}", R"({"messages": ["a"]})"),
      "ERROR: chat template line 3: can only concatenate str (not \"int\") to str");
}

TEST(JinjaErrorTest, UnsupportedTagsAreRefused) {
  auto t = Template::Parse("{% include 'other.jinja' %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Status::Code::kNotSupported);
}

TEST(JinjaErrorTest, InvalidUtf8IsRefused) {
  auto t = Template::Parse("abc\xFF");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "chat template: the text is not valid UTF-8");
}

TEST(JinjaErrorTest, ContextMustBeADict) {
  auto t = Template::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(Value::List({})).ok());
}

// ---- limits: hostile templates fail fast and cleanly -----------------------------

bool IsResourceExhausted(const Status& st) { return st.code() == Status::Code::kResourceExhausted; }

TEST(JinjaLimitsTest, NestedLoopsHitTheStepLimit) {
  const Status st = RenderStatus(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_TRUE(IsResourceExhausted(st)) << st.ToString();
}

TEST(JinjaLimitsTest, OutputIsBounded) {
  Limits limits;
  limits.max_output_bytes = 1000;
  const Status st = RenderStatus("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", limits);
  EXPECT_TRUE(IsResourceExhausted(st)) << st.ToString();
  EXPECT_NE(st.message().find("max_output_bytes"), std::string::npos);
}

TEST(JinjaLimitsTest, StringDoublingIsBounded) {
  const Status st = RenderStatus(
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  EXPECT_TRUE(IsResourceExhausted(st)) << st.ToString();
}

TEST(JinjaLimitsTest, ListRepetitionIsBounded) {
  EXPECT_TRUE(IsResourceExhausted(RenderStatus("{{ ([1] * 100000000)|length }}")));
  EXPECT_TRUE(IsResourceExhausted(RenderStatus("{{ ('ab' * 100000000)|length }}")));
}

TEST(JinjaLimitsTest, RangeIsLimitedAsInTheSandbox) {
  EXPECT_EQ(Render("{{ range(100001)|length }}"),
            "ERROR: chat template line 1: Range too big. The sandbox blocks ranges larger than "
            "MAX_RANGE (100000).");
}

TEST(JinjaLimitsTest, DeepExpressionNestingIsRefusedAtParse) {
  const std::string src = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  auto t = Template::Parse(src);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nesting too deep"), std::string::npos);
}

TEST(JinjaLimitsTest, DeepBlockNestingIsRefusedAtParse) {
  std::string src;
  for (int i = 0; i < 1000; ++i) src += "{% if true %}";
  EXPECT_FALSE(Template::Parse(src).ok());
  EXPECT_FALSE(Template::Parse("{{ " + std::string(5000, '-') + "1 }}").ok());
  EXPECT_TRUE(Template::Parse("{{ " + std::string(5000, 'n') + " }}").ok());  // only depth counts
}

TEST(JinjaLimitsTest, LongOperatorChainsAreRefusedAtParse) {
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_FALSE(Template::Parse(sum + " }}").ok());
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 5000; ++i) filters += "|trim";
  EXPECT_FALSE(Template::Parse(filters + " }}").ok());
  std::string cond = "{{ 1";
  for (int i = 0; i < 5000; ++i) cond += " if 1 else 1";
  EXPECT_FALSE(Template::Parse(cond + " }}").ok());
  EXPECT_EQ(Render("{{ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 }}"), "10");
}

TEST(JinjaLimitsTest, LongElifChainsAreFlat) {
  std::string src = "{% if n == 0 %}0";
  for (int i = 1; i < 5000; ++i)
    src += "{% elif n == " + std::to_string(i) + " %}" + std::to_string(i);
  src += "{% else %}other{% endif %}";
  EXPECT_EQ(Render(src, R"({"n": 4999})"), "4999");
  EXPECT_EQ(Render(src, R"({"n": 5000})"), "other");
}

TEST(JinjaLimitsTest, DeeplyNestedValuesAreFreedWithoutRecursion) {
  EXPECT_EQ(Render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}"),
            "1");
  EXPECT_EQ(Render("{% set ns = namespace(x={}) %}{% for i in range(100000) %}"
                   "{% set ns.x = {'k': ns.x} %}{% endfor %}{{ ns.x|length }}"),
            "1");
}

TEST(JinjaLimitsTest, ManyVariablesStayFast) {
  std::string src;
  for (int i = 0; i < 20000; ++i)
    src += "{% set v" + std::to_string(i) + " = " + std::to_string(i) + " %}";
  src += "{% for i in range(50000) %}{{ v19999 if false }}{% endfor %}{{ v19999 }}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Render(src), "19999");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(JinjaLimitsTest, MacroRecursionIsBounded) {
  const Status st = RenderStatus("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_TRUE(IsResourceExhausted(st)) << st.ToString();
  EXPECT_NE(st.message().find("max_call_depth"), std::string::npos);
}

TEST(JinjaLimitsTest, ComparingSharedStructuresIsBounded) {
  // Each level is 1000 references to two distinct but equal lists of the level
  // below: == would visit 1000^5 elements without a budget.
  const std::string src =
      "{% set ns = namespace(a=[1], b=[1]) %}"
      "{% for i in range(5) %}{% set ns.a = [ns.a, ns.b] * 500 %}"
      "{% set ns.b = [ns.b, ns.a] * 500 %}{% endfor %}{{ ns.a == ns.b }}";
  const auto start = std::chrono::steady_clock::now();
  const Status st = RenderStatus(src);
  EXPECT_TRUE(IsResourceExhausted(st)) << st.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(JinjaLimitsTest, PrintingSharedStructuresIsBounded) {
  const std::string src =
      "{% set a = [1] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}{{ c }}";
  EXPECT_TRUE(IsResourceExhausted(RenderStatus(src)));
}

TEST(JinjaLimitsTest, SubstringSearchIsLinear) {
  // 'a' * 2^20 searched for 'a' * 2^19 + 'b': quadratic search would take minutes.
  const std::string src =
      "{% set h = 'a' * 1048576 %}{% set n = 'a' * 524288 ~ 'b' %}{{ n in h }}{{ h.find(n) }}"
      "{{ h.split(n)|length }}{{ h.count(n) }}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Render(src), "False-110");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Every operation is charged for the bytes it touches: a template that
// applies any string operation to a 16 MB string in a loop stops at
// max_steps (in ~20 rounds) instead of running for hours.
TEST(JinjaLimitsTest, EveryStringOperationIsChargedByTheBytesItTouches) {
  const std::vector<std::string> ops = {
      "s.upper()", "s.lower()", "s.title()", "s.capitalize()", "s.swapcase()", "s.casefold()",
      "s.strip()", "s.lstrip('y')", "s.rstrip('y')", "s.splitlines()", "s.startswith('y')",
      "s.endswith('y')", "'y' in s", "'y' not in s", "s.find('y')", "s.rfind('y')",
      "s.count('y')", "s.replace('y', 'z')", "s.split('y')", "s.rsplit('y')", "s.partition('y')",
      "s.removeprefix('y')", "s.removesuffix('y')", "s.isdigit()", "s.isupper()", "s.zfill(5)",
      "s.center(5)", "s.format()", "s|upper", "s|lower", "s|trim",
      "s|length", "s|count", "s|wordcount", "s|capitalize", "s|title", "s|center(10)",
      "s|replace('y', 'z')", "s|indent", "s|string", "s|first", "s|last", "s|reverse", "s|e",
      "s|tojson", "s|truncate(10)", "s|safe", "s|min", "s[1:]", "s[::-1]", "s[5]", "s[-1]",
      "s == t", "s < t", "s ~ ''", "s + ''", "'%s'|format(s)", "'%s' % s", "[s]|join",
      "[s, s]|join('')", "'-'.join([s])", "s is lower", "s is string", "{s: 1}", "{'k': 1}[s]",
      "[s]|map('upper')|list", "[s]|select('lower')|list", "[s]|unique|list", "[s]|sort",
      "[s]|min", "[s]|max", "{s: 1}|dictsort", "[{'a': s}]|groupby('a')|list", "s in [t]",
      "[s] == [t]", "[s].count(t)", "[s].index(s)", "[s]|tojson", "loop.changed(s)"};
  for (const std::string& op : ops) {
    const std::string src =
        "{% set s = 'x' * 16000000 %}{% set t = 'x' * 16000000 %}"
        "{% for i in range(100000) %}{% set r = " +
        op + " %}{% endfor %}";
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = RenderStatus(src);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(IsResourceExhausted(st)) << op << ": " << st.ToString();
    // max_steps, or for the few that build something huge first max_items /
    // max_output_bytes.
    EXPECT_NE(st.message().find("(max_"), std::string::npos) << op << ": " << st.ToString();
    // Does not hang: the budget is about a second of work, far under this.
    EXPECT_LT(s, 20.0) << op;
    std::fprintf(stderr, "%-28s %.2f s\n", op.c_str(), s);
  }
}

// RenderOptions::should_stop ends a render that is under its limits but no
// longer wanted (the client left).
TEST(JinjaLimitsTest, ShouldStopEndsTheRender) {
  auto t = Template::Parse("{% for i in range(100000) %}{% for j in range(100) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  int asked = 0;
  RenderOptions options;
  options.should_stop = [&asked] { return ++asked >= 3; };
  RenderErrorInfo info;
  auto r = t->Render(Value::MakeDict({}), options, &info);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsResourceExhausted(r.status())) << r.status().ToString();
  EXPECT_NE(r.status().message().find("rendering was stopped"), std::string::npos);
  EXPECT_TRUE(info.stopped);
  EXPECT_EQ(asked, 3);
}

TEST(JinjaLimitsTest, SelfReferencingNamespacePrints) {
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.s = ns %}{{ ns }}"),
            "<Namespace {'s': <Namespace {...}>}>");
}

TEST(JinjaLimitsTest, SourceSizeIsBounded) {
  Limits limits;
  limits.max_source_bytes = 10;
  EXPECT_FALSE(Template::Parse("01234567890", limits).ok());
}

// ---- JSON ----------------------------------------------------------------------

TEST(JinjaJsonTest, ParseKeepsOrderAndPythonTypes) {
  auto v = ParseJson(R"({"b": 1, "a": [1.0, 2, true, null, "\u00e9\ud83d\ude00"], "b": 3})");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->Repr(), "{'b': 3, 'a': [1.0, 2, True, None, '\xC3\xA9\xF0\x9F\x98\x80']}");
}

TEST(JinjaJsonTest, ParseRefusesMalformedInput) {
  EXPECT_FALSE(ParseJson("[1,]").ok());
  EXPECT_FALSE(ParseJson("{\"a\" 1}").ok());
  EXPECT_FALSE(ParseJson("\"\xFF\"").ok());
  EXPECT_FALSE(ParseJson("[1] 2").ok());
  EXPECT_FALSE(ParseJson(std::string(1000, '[') + std::string(1000, ']')).ok());
}

TEST(JinjaJsonTest, DumpIsPythonsJsonDumps) {
  auto v = ParseJson(R"({"a": [1, 1.5, 1e16, "x\ty"], "b": {}})");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(ToJson(*v).value(), "{\"a\": [1, 1.5, 1e+16, \"x\\ty\"], \"b\": {}}");
}

// ---- concurrency ---------------------------------------------------------------

TEST(JinjaTemplateTest, OneTemplateRendersFromManyThreads) {
  auto t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}"
      "{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  const Value ctx = Json(R"({"messages": [{"content": "a"}, {"content": "b"}]})");
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) outs[i] = t->Render(ctx).value();
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& o : outs) EXPECT_EQ(o, "ab2");
}

}  // namespace
}  // namespace mx::jinja
