// Unit tests of the chat-template interpreter: one behaviour per test. Expected
// texts are what Python jinja2 3.1 (configured as transformers configures it)
// renders for the same template; the goldens (golden_test.cc) cover the real
// templates.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "templates/jinja/jinja_test_util.h"
#include "templates/jinja/json.h"
#include "templates/jinja/template.h"

namespace mx::jinja {
namespace {

// ---- lexer: whitespace control as transformers configures jinja2 -----------

TEST(JinjaLexerTest, TrimBlocksRemovesTheNewlineAfterABlockTag) {
  EXPECT_EQ(Render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
}

TEST(JinjaLexerTest, LstripBlocksRemovesIndentBeforeABlockTag) {
  EXPECT_EQ(Render("<\n    {% if true %}\n    x\n    {% endif %}\n>"), "<\n    x\n>");
}

TEST(JinjaLexerTest, LstripDoesNotApplyToPrintTags) {
  EXPECT_EQ(Render("a\n  {{ 'v' }}\n  {% set x = 1 %}\nb"), "a\n  v\nb");
}

TEST(JinjaLexerTest, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(Render("a  \n {%- if true %}x{% endif -%} \n\n b"), "axb");
  EXPECT_EQ(Render("{{ 'a' -}}\n\n  b"), "ab");
}

TEST(JinjaLexerTest, PlusKeepsTheIndentAndTheNewline) {
  EXPECT_EQ(Render("a\n  {%+ if true %}x{% endif %}\nb"), "a\n  xb");
  EXPECT_EQ(Render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(JinjaLexerTest, CommentsAreDroppedAndTrimmedLikeBlocks) {
  EXPECT_EQ(Render("x\n  {# comment #}\n  y"), "x\n  y");
  EXPECT_EQ(Render("a {#- c -#} b"), "ab");
}

TEST(JinjaLexerTest, AnOpenCommentOrRawAtTheVeryEndIsIgnoredAsInJinja2) {
  EXPECT_EQ(Render("x{#"), "x");
  EXPECT_EQ(Render("{% raw %}"), "");
  EXPECT_EQ(Render("{# x"), "PARSE ERROR: chat template line 1: Missing end of comment tag");
}

TEST(JinjaLexerTest, RawBlockIsPrintedVerbatim) {
  EXPECT_EQ(Render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

TEST(JinjaLexerTest, OneTrailingNewlineIsDropped) {
  EXPECT_EQ(Render("x\n"), "x");
  EXPECT_EQ(Render("x\n\n"), "x\n");
}

TEST(JinjaLexerTest, TemplateNewlinesAreNormalisedButDataIsNot) {
  EXPECT_EQ(Render("a\r\nb\rc{{ s }}", R"({"s": "1\r\n2"})"), "a\nb\nc1\r\n2");
}

TEST(JinjaLexerTest, ClosingBracesInsideAnExpressionDoNotEndTheTag) {
  EXPECT_EQ(Render("{{ {'a': {'b': 1}}}}"), "{'a': {'b': 1}}");
  EXPECT_EQ(Render("{{ '}}' }}"), "}}");
}

TEST(JinjaLexerTest, StringLiteralEscapesArePythons) {
  EXPECT_EQ(Render(R"({{ 'a\nb' }}|{{ "\x41\u00e9\U0001F600\101" }}|{{ 'a\qb' }}|{{ 'x' "y" }})"),
            "a\nb|A\xC3\xA9\xF0\x9F\x98\x80"
            "A|a\\qb|xy");
}

TEST(JinjaLexerTest, NumberLiterals) {
  EXPECT_EQ(Render("{{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1e3 }} {{ 2.5 }}"),
            "1000 31 5 15 1000.0 2.5");
}

// ---- printing values as Python's str() ---------------------------------------

TEST(JinjaPrintTest, ScalarsPrintAsPython) {
  EXPECT_EQ(Render("{{ none }} {{ true }} {{ False }} {{ 1.0 }} {{ 7 / 2 }} {{ 4 / 2 }}"),
            "None True False 1.0 3.5 2.0");
}

TEST(JinjaPrintTest, FloatsUseTheShortestRoundTripRepr) {
  EXPECT_EQ(Render("{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ -0.0 }}"),
            "0.30000000000000004 1e+16 1000000000000000.0 1.5e-05 0.0001 -0.0");
}

TEST(JinjaPrintTest, ContainersPrintAsTheirRepr) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }}"),
            "[1, 'a', None, True, 1.5, {'k': [2]}]");
  EXPECT_EQ(Render("{{ (1,) }} {{ (1, 2) }} {{ () }}"), "(1,) (1, 2) ()");
}

TEST(JinjaPrintTest, StringReprPicksQuotesAndEscapesAsPython) {
  EXPECT_EQ(Render(R"({{ ["it's", 'say "hi"', 'both \' "', '\n\t\\', '\x00'] }})"),
            R"(["it's", 'say "hi"', 'both \' "', '\n\t\\', '\x00'])");
}

TEST(JinjaPrintTest, ContextKeyOrderIsKept) {
  EXPECT_EQ(Render("{{ d }}|{{ d|tojson }}", R"({"d": {"z": 1, "a": 2}})"),
            "{'z': 1, 'a': 2}|{\"z\": 1, \"a\": 2}");
}

// ---- Undefined ---------------------------------------------------------------

TEST(JinjaUndefinedTest, PrintsEmptyIsFalsyAndIteratesAsEmpty) {
  EXPECT_EQ(Render("[{{ x }}]{{ x is defined }}{{ not x }}{% for i in x %}i{% else %}E{% endfor %}"
                   "{{ x|length }}{{ x|default('d') }}{{ x ~ 'c' }}"),
            "[]FalseTrueE0dc");
}

TEST(JinjaUndefinedTest, NoneIsDefinedButUndefinedIsNotNone) {
  EXPECT_EQ(Render("{{ t is defined }}{{ t is none }}", R"({"t": null})"), "TrueTrue");
  EXPECT_EQ(Render("{{ t is defined }}{{ t is none }}"), "FalseFalse");
}

TEST(JinjaUndefinedTest, AttributeOfUndefinedRaises) {
  EXPECT_EQ(Render("{{ x.y }}"), "ERROR: chat template line 1: 'x' is undefined");
}

TEST(JinjaUndefinedTest, MissingAttributeIsUndefinedUntilMisused) {
  EXPECT_EQ(Render("[{{ m.nope }}]{{ m.nope is defined }}", R"({"m": {"a": 1}})"), "[]False");
  EXPECT_EQ(Render("{{ m.content.split('x') }}", R"({"m": {"content": null}})"),
            "ERROR: chat template line 1: 'None' has no attribute 'split'");
  EXPECT_EQ(Render("{{ s.items() }}", R"({"s": "abc"})"),
            "ERROR: chat template line 1: 'str object' has no attribute 'items'");
}

TEST(JinjaUndefinedTest, ArithmeticOnUndefinedRaises) {
  EXPECT_EQ(Render("{{ x + 'a' }}"), "ERROR: chat template line 1: 'x' is undefined");
}

TEST(JinjaUndefinedTest, InlineIfWithoutElseIsUndefined) {
  EXPECT_EQ(Render("[{{ 'y' if false }}]{{ ('y' if false) is defined }}"), "[]False");
}

// ---- statements --------------------------------------------------------------

TEST(JinjaStatementTest, LoopVariables) {
  EXPECT_EQ(Render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}"
                   "{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}"),
            "103TrueFalse3bo;212FalseFalse3ace;321FalseTrue3bo;");
}

TEST(JinjaStatementTest, LoopFilterCountsOnlyTheKeptItems) {
  EXPECT_EQ(Render("{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}/{{ loop.length }} "
                   "{% endfor %}"),
            "1/2 2/2 ");
}

TEST(JinjaStatementTest, ForElseRunsWhenNothingIsIterated) {
  EXPECT_EQ(Render("{% for x in [1] if x > 5 %}{{ x }}{% else %}none{% endfor %}"), "none");
}

TEST(JinjaStatementTest, BreakAndContinue) {
  EXPECT_EQ(Render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
}

TEST(JinjaStatementTest, SetInsideALoopDoesNotLeakAndEachIterationStartsFresh) {
  EXPECT_EQ(
      Render("{% set x = 'o' %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{% endfor %}{{ x }}"),
      "ooo");
}

TEST(JinjaStatementTest, NamespaceCarriesStateOutOfLoops) {
  EXPECT_EQ(Render("{% set ns = namespace(n=0, seen=[]) %}{% for x in [1, 2, 3] %}"
                   "{% set ns.n = ns.n + x %}{% set ns.seen = ns.seen + [x] %}{% endfor %}"
                   "{{ ns.n }} {{ ns.seen }}"),
            "6 [1, 2, 3]");
}

TEST(JinjaStatementTest, AssigningAnAttributeOfANonNamespaceFails) {
  EXPECT_EQ(Render("{% set x = 1 %}{% set x.a = 2 %}"),
            "ERROR: chat template line 1: cannot assign attribute on non-namespace object");
}

TEST(JinjaStatementTest, TupleUnpacking) {
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% for k, v in {'x': 1}.items() %}{{ k }}"
                   "{{ v }}{% endfor %}"),
            "12x1");
  EXPECT_EQ(Render("{% for a, b in [[1]] %}{% endfor %}"),
            "ERROR: chat template line 1: not enough values to unpack (expected 2, got 1)");
}

TEST(JinjaStatementTest, BlockSetCapturesOutputAndMayFilterIt) {
  EXPECT_EQ(Render("{% set x | trim | upper %}  a{{ 1 }}b  {% endset %}[{{ x }}]"), "[A1B]");
}

TEST(JinjaStatementTest, FilterBlock) {
  EXPECT_EQ(Render("{% filter replace('a', 'b') | upper %}aaa{{ 'c' }}{% endfilter %}"), "BBBC");
}

TEST(JinjaStatementTest, GenerationBlockRendersItsBody) {
  EXPECT_EQ(Render("{% generation %}gen{{ 1 }}{% endgeneration %}"), "gen1");
}

TEST(JinjaStatementTest, RecursiveLoop) {
  EXPECT_EQ(Render("{% for x in t recursive %}{{ x.n }}{% if x.c %}[{{ loop(x.c) }}]{% endif %}"
                   "{{ loop.depth }}{% endfor %}",
                   R"({"t": [{"n": "a", "c": [{"n": "b"}]}, {"n": "d"}]})"),
            "a[b2]1d1");
}

// ---- macros ------------------------------------------------------------------

TEST(JinjaMacroTest, DefaultsKeywordsAndMissingParameters) {
  EXPECT_EQ(Render("{% macro f(a, b='d', c=a) %}{{ a }}|{{ b }}|{{ c }}{% endmacro %}"
                   "{{ f(1) }};{{ f(b=5, a=4) }};[{{ f() }}]"),
            "1|d|1;4|5|4;[|d|]");
}

TEST(JinjaMacroTest, ExtraArgumentsAreRefusedUnlessCollected) {
  EXPECT_EQ(Render("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}"),
            "ERROR: chat template line 1: macro 'f' takes not more than 1 argument(s)");
  EXPECT_EQ(Render("{% macro f(a) %}{% endmacro %}{{ f(b=1) }}"),
            "ERROR: chat template line 1: macro 'f' takes no keyword argument 'b'");
  EXPECT_EQ(Render("{% macro f() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, x=2) }}"),
            "(1,){'x': 2}");
}

TEST(JinjaMacroTest, CallBlockPassesCaller) {
  EXPECT_EQ(Render("{% macro f(x) %}[{{ caller(x, 2) }}]{% endmacro %}"
                   "{% call(a, b) f(1) %}{{ a }}+{{ b }}{% endcall %}"),
            "[1+2]");
}

TEST(JinjaMacroTest, MacrosSeeTheCurrentValueOfOuterVariables) {
  EXPECT_EQ(Render("{% macro f() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ f() }}{% set x = 2 %}"
                   "{{ f() }}"),
            "12");
}

TEST(JinjaMacroTest, RecursiveMacro) {
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ f(4) }}"),
            "4321");
}

// ---- expressions ---------------------------------------------------------------

TEST(JinjaExpressionTest, ArithmeticFollowsPython) {
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} "
                   "{{ 1 + true }} {{ 'ab' * 2 }} {{ [0] * 2 }} {{ -2 ** 2 }}"),
            "3 -4 2 1024 0.5 2 abab [0, 0] 4");
  EXPECT_EQ(Render("{{ 1 / 0 }}"), "ERROR: chat template line 1: division by zero");
}

TEST(JinjaExpressionTest, TypeErrorsUsePythonWording) {
  EXPECT_EQ(Render("{{ 'a' + [1] }}"),
            "ERROR: chat template line 1: can only concatenate str (not \"list\") to str");
  EXPECT_EQ(Render("{{ 1 in none }}"),
            "ERROR: chat template line 1: argument of type 'NoneType' is not iterable");
  EXPECT_EQ(Render("{{ none > 0 }}"),
            "ERROR: chat template line 1: '>' not supported between "
            "instances of 'NoneType' and 'int'");
}

TEST(JinjaExpressionTest, ComparisonsAndMembership) {
  EXPECT_EQ(Render("{{ 1 == 1.0 }}{{ [1] == [1.0] }}{{ (1,) == [1] }}{{ 1 < 2 < 3 }}"
                   "{{ 'b' in 'abc' }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}"),
            "TrueTrueFalseTrueTrueTrueTrue");
}

TEST(JinjaExpressionTest, AndOrReturnOperands) {
  EXPECT_EQ(Render("{{ '' or 'x' }}|{{ 0 and 1 }}|{{ [] or none }}"), "x|0|None");
}

TEST(JinjaExpressionTest, SubscriptsAndSlicesCountCodePoints) {
  EXPECT_EQ(Render("{{ s[1] }}{{ s[-1] }}{{ s[::-1] }}{{ s[1:3] }}{{ s[::2] }}",
                   R"({"s": "h\u00e9llo"})"),
            "\xC3\xA9ooll\xC3\xA9h\xC3\xA9lhlo");
  EXPECT_EQ(Render("{{ [1, 2, 3, 4, 5][4:0:-2] }}{{ l[-1] }}[{{ l[9] }}]", R"({"l": [1]})"),
            "[5, 3]1[]");
}

TEST(JinjaExpressionTest, StringMethods) {
  EXPECT_EQ(Render("{{ ' a  b '.split() }}{{ 'a,b,,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}"
                   "{{ 'xxaxx'.strip('x') }}{{ '\n\nhi'.lstrip('\n') }}"
                   "{{ 'abc'.startswith(('x', 'ab')) }}{{ 'hello world'.title() }}"
                   "{{ 'aXbX'.replace('X', '-', 1) }}{{ 'abcabc'.rfind('c') }}"),
            "['a', 'b']['a', 'b,,c']['a,b', 'c']ahiTrueHello Worlda-bX5");
}

TEST(JinjaExpressionTest, DictMethodsAndAttributeOrder) {
  EXPECT_EQ(Render("{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.items()|list }} {{ d.keys()|list }} "
                   "{{ d.items }}",
                   R"({"d": {"a": 1, "items": 2}})"),
            "1 0 [('a', 1), ('items', 2)] ['a', 'items'] <built-in method items of dict object>");
  EXPECT_EQ(Render("{{ d['items'] }}", R"({"d": {"items": 2}})"), "2");
}

TEST(JinjaExpressionTest, Tests) {
  EXPECT_EQ(
      Render("{{ 1 is odd }}{{ 9 is divisibleby 3 }}{{ true is integer }}{{ true is number }}"
             "{{ 'a' is string }}{{ {} is mapping }}{{ {} is sequence }}{{ 1 is iterable }}"
             "{{ x is iterable }}{{ none is none }}{{ 2 is in [1, 2] }}{{ 'a' is not string }}"),
      "TrueTrueFalseTrueTrueTrueTrueFalseTrueTrueTrueFalse");
}

TEST(JinjaExpressionTest, PercentFormatting) {
  EXPECT_EQ(Render("{{ '%s-%d-%5.2f|%-3s|%03d|%x|%r|%%' % ('a', 3, 3.14159, 'b', 7, 255, 'q') }}"),
            "a-3- 3.14|b  |007|ff|'q'|%");
}

TEST(JinjaExpressionTest, SlicingRaisesPythonsErrors) {
  // jinja2 compiles x[a:b] to Python's slicing, not to the sandboxed getitem.
  EXPECT_EQ(Render("{{ x[1:2] }}", R"({"x": 4})"),
            "ERROR: chat template line 1: 'int' object is not subscriptable");
  EXPECT_EQ(Render("{{ s['a':] }}", R"({"s": "abc"})"),
            "ERROR: chat template line 1: slice indices must be integers or None or have an "
            "__index__ method");
  EXPECT_EQ(Render("{{ m.content[:5] }}", R"({"m": {"content": null}})"),
            "ERROR: chat template line 1: 'NoneType' object is not subscriptable");
}

TEST(JinjaExpressionTest, MethodArgumentsAreTypeCheckedAsInPython) {
  EXPECT_EQ(Render("{{ 'a'.rjust(none) }}"),
            "ERROR: chat template line 1: 'NoneType' object cannot be interpreted as an integer");
  EXPECT_EQ(Render("{{ 'a\\nb'.splitlines('x') }}"),
            "ERROR: chat template line 1: 'str' object cannot be interpreted as an integer");
  EXPECT_EQ(Render("{{ 'abc'.startswith('b', 'x') }}"),
            "ERROR: chat template line 1: slice indices must be integers or None or have an "
            "__index__ method");
  EXPECT_EQ(Render("{{ 'abc'.startswith('', 3) }}{{ 'abc'.startswith('', 4) }}"), "TrueFalse");
}

TEST(JinjaExpressionTest, StrFormatRefusesWhatPythonRefuses) {
  EXPECT_EQ(Render("{{ '{:-}'.format('a') }}"),
            "ERROR: chat template line 1: Sign not allowed in string format specifier");
  EXPECT_EQ(Render("{{ '{!x}'.format(1) }}"),
            "ERROR: chat template line 1: Unknown conversion specifier x");
  EXPECT_EQ(Render("{{ '{:.}'.format(1.5) }}"),
            "ERROR: chat template line 1: Format specifier missing precision");
  EXPECT_EQ(Render("{{ '{:05c}'.format(42) }}"), "0000*");
}

TEST(JinjaExpressionTest, FloatPowerOverflowRaises) {
  EXPECT_EQ(Render("{{ 10.0 ** 400 }}"),
            "ERROR: chat template line 1: (34, 'Numerical result out of range')");
}

TEST(JinjaExpressionTest, CaseMappingOfDigraphsAndLigatures) {
  EXPECT_EQ(Render("{{ '\u01c6'.upper() }}{{ '\u01c6'.title() }}{{ '\ufb01x'.upper() }}"
                   "{{ '\ufb01x'.title() }}{{ '\u02e0'.isalpha() }}{{ '\u0661'.isalpha() }}"),
            "\u01c4\u01c5FIXFixTrueFalse");
}

// ---- filters -----------------------------------------------------------------

TEST(JinjaFilterTest, TojsonKeepsKeyOrderAndNonAscii) {
  EXPECT_EQ(Render("{{ {'b': [1, 2.0, none, true], 'a': '\u00e9\"\n'}|tojson }}"),
            "{\"b\": [1, 2.0, null, true], \"a\": \"\xC3\xA9\\\"\\n\"}");
}

TEST(JinjaFilterTest, TojsonIndentUsesPythonSeparators) {
  EXPECT_EQ(Render("{{ {'a': [1, {}], 'b': []}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
}

TEST(JinjaFilterTest, TojsonOfAGeneratorFailsAsInPython) {
  EXPECT_EQ(Render("{{ [1]|map('string')|tojson }}"),
            "ERROR: chat template line 1: Object of type generator is not JSON serializable");
  EXPECT_EQ(Render("{{ [1]|map('string')|list|tojson }}"), "[\"1\"]");
}

TEST(JinjaFilterTest, DefaultWithBoolean) {
  EXPECT_EQ(Render("{{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|d('d', true) }}"), "d||d");
}

TEST(JinjaFilterTest, MapSelectAndFriends) {
  const char* ctx = R"({"l": [{"r": "u", "c": 1}, {"r": "a", "c": 2}]})";
  EXPECT_EQ(
      Render("{{ l|map(attribute='c')|list }}{{ l|selectattr('r', 'equalto', 'u')|list|length }}"
             "{{ l|rejectattr('r', '==', 'u')|map(attribute='c')|first }}"
             "{{ [1, 2, 3, 4]|select('odd')|list }}{{ ['a', 'b']|map('upper')|join }}",
             ctx),
      "[1, 2]12[1, 3]AB");
}

TEST(JinjaFilterTest, SortDictsortUniqueMinMax) {
  EXPECT_EQ(Render("{{ ['b', 'A', 'c']|sort }}{{ {'b': 1, 'a': 2}|dictsort }}"
                   "{{ ['a', 'A', 'b']|unique|list }}{{ [3, 1, 2]|min }}{{ [3, 1, 2]|max }}"),
            "['A', 'b', 'c'][('a', 2), ('b', 1)]['a', 'b']13");
}

TEST(JinjaFilterTest, StringFilters) {
  EXPECT_EQ(Render("{{ '  x '|trim }}|{{ 'hello-world x'|title }}|{{ 'a\nb'|indent(2, true) }}|"
                   "{{ '42.7'|int }}|{{ 'x'|int(7) }}|{{ 2.5|round }}|{{ 'one two'|wordcount }}"),
            "x|Hello-World X|  a\n  b|42|7|2.0|2");
}

TEST(JinjaFilterTest, IntAndFloatParseTextAsPython) {
  EXPECT_EQ(Render("{{ ' +1_000.5 '|float }}|{{ '42\\x00'|float }}|{{ '1__0'|int }}|"
                   "{{ '0x1f'|int(0, 16) }}|{{ '010'|int(0, 0) }}|{{ '42'|int(0, 1) }}"),
            "1000.5|0.0|0|31|10|42");
}

TEST(JinjaFilterTest, FilterArgumentsAreCheckedAsInJinja2) {
  EXPECT_EQ(Render("{{ [2, 1]|sort(reverse=nope) }}"),
            "ERROR: chat template line 1: 'nope' is undefined");
  EXPECT_EQ(Render("{{ [1]|map|list }}"),
            "ERROR: chat template line 1: map requires a filter argument");
  EXPECT_EQ(Render("{{ namespace(nope) }}"), "ERROR: chat template line 1: 'nope' is undefined");
}

TEST(JinjaFilterTest, SafeMarkupEscapesWhatIsAddedToIt) {
  EXPECT_EQ(Render("{{ ('<a>'|safe) + '<b>' }}|{{ ('<a>'|safe) ~ '<b>' }}|{{ '<&>'|e }}"),
            "<a>&lt;b&gt;|<a><b>|&lt;&amp;&gt;");
}

TEST(JinjaFilterTest, UnknownFilterFailsAtParseOutsideAnIf) {
  EXPECT_EQ(Render("line1\n{{ x|nosuch }}"),
            "PARSE ERROR: chat template line 2: No filter named 'nosuch'.");
}

TEST(JinjaFilterTest, UnknownFilterInsideAnIfFailsOnlyWhenReached) {
  EXPECT_EQ(Render("{% if false %}{{ x|from_json }}{% endif %}ok"), "ok");
  EXPECT_EQ(Render("{% if true %}{{ x|from_json }}{% endif %}ok"),
            "ERROR: chat template line 1: No filter named 'from_json' found.");
}

// ---- globals and the sandbox ---------------------------------------------------

TEST(JinjaGlobalsTest, RangeDictNamespace) {
  EXPECT_EQ(Render("{{ range(3)|list }}{{ range(10, 0, -4)|list }}{{ dict(a=1) }}"
                   "{{ namespace(a=1).a }}"),
            "[0, 1, 2][10, 6, 2]{'a': 1}1");
}

TEST(JinjaGlobalsTest, StrftimeNowFormatsTheGivenTime) {
  EXPECT_EQ(Render("{{ strftime_now('%Y-%m-%d %H:%M %B %b %A %a %-d %j') }}"),
            "2026-01-15 09:05 January Jan Thursday Thu 15 015");
}

TEST(JinjaGlobalsTest, RaiseExceptionGivesTheTemplatesMessage) {
  auto t =
      Template::Parse("{% if true %}\n{{ raise_exception('Roles must alternate') }}{% endif %}");
  ASSERT_TRUE(t.ok());
  RenderErrorInfo info;
  auto r = t->Render(Value::MakeDict({}), {}, &info);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "Roles must alternate");
  EXPECT_TRUE(info.raised);
  EXPECT_EQ(info.line, 2);
}

TEST(JinjaGlobalsTest, ListAppendIsRefusedByTheImmutableSandbox) {
  EXPECT_EQ(Render("[{{ l.append }}]", R"({"l": []})"), "[]");
  EXPECT_EQ(
      Render("{% set _ = l.append(1) %}", R"({"l": []})"),
      "ERROR: chat template line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(
      Render("{{ d.update({}) }}", R"({"d": {}})"),
      "ERROR: chat template line 1: access to attribute 'update' of 'dict' object is unsafe.");
}

}  // namespace
}  // namespace mx::jinja
