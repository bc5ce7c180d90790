// The recursive-descent parser shared by parser.cc (token stream, statements)
// and parser_expr.cc (expressions). Internal to the jinja module: use
// ParseProgram (parser.h).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "templates/jinja/ast.h"
#include "templates/jinja/lexer.h"

namespace mx::jinja::parser_internal {

// How an error message names a token: its text for names and operators,
// jinja2's description ("end of print statement") otherwise.
const char* DescribeType(TokenType t);
std::string Describe(const Token& t);

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting)
      : tokens_(std::move(tokens)), max_nesting_(max_nesting) {}

  Result<Program> Run();

 private:
  // ---- token stream ---------------------------------------------------------

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsName(std::string_view name) const {
    return Cur().type == TokenType::kName && Cur().text == name;
  }
  bool IsOp(std::string_view op) const {
    return Cur().type == TokenType::kOperator && Cur().text == op;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }

  Status Fail(const std::string& msg, int line = 0) const;
  Status ExpectOp(std::string_view op);
  Status ExpectType(TokenType type);
  Result<std::string> ExpectName();

  int Symbol(const std::string& name);

  // Limits recursion: every nested statement body and every nested expression
  // level goes through one of these.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p) : p_(p) { ++p_.depth_; }
    ~DepthGuard() { --p_.depth_; }
    bool too_deep() const { return p_.depth_ > p_.max_nesting_; }

   private:
    Parser& p_;
  };
  Status TooDeep() const {
    return Fail("template nesting too deep (limit " + std::to_string(max_nesting_) + ")");
  }

  // Counts each node a loop wraps around its result (a + b + c, x|f|g, a.b.c)
  // as one more level of nesting, so that long chains cannot build a tree
  // deeper than max_nesting (evaluating and freeing it recurses).
  class ChainGuard {
   public:
    explicit ChainGuard(Parser& p) : p_(p) {}
    ~ChainGuard() { p_.depth_ -= n_; }
    bool Grow() {
      ++n_;
      ++p_.depth_;
      return p_.depth_ <= p_.max_nesting_;
    }

   private:
    Parser& p_;
    int n_ = 0;
  };

  // Saves and restores whether we are inside an `if` (jinja2's soft frame).
  class SoftScope {
   public:
    SoftScope(Parser& p, bool soft) : p_(p), saved_(p.soft_) { p_.soft_ = soft; }
    ~SoftScope() { p_.soft_ = saved_; }

   private:
    Parser& p_;
    bool saved_;
  };

  ExprPtr NewExpr(ExprKind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // ---- statements -----------------------------------------------------------

  bool AtEndTag(std::initializer_list<std::string_view> end_tags) const {
    if (Cur().type != TokenType::kName) return false;
    return std::find(end_tags.begin(), end_tags.end(), Cur().text) != end_tags.end();
  }

  static std::string JoinTags(const std::vector<std::string>& tags);

  Status FailEof(int line) const;

  Status FailUnknownTag(const std::string& name, int line) const;

  // Parses template data, prints and statements until a block tag whose name is
  // one of `end_tags` (left as the current token) or the end of the template.
  Result<Body> Subparse(std::initializer_list<std::string_view> end_tags);

  // jinja2's parse_statements: optional ':', the end of the opening tag, the
  // body up to one of `end_tags`; with `drop_needle` the end tag is consumed.
  Result<Body> ParseStatements(std::initializer_list<std::string_view> end_tags, bool drop_needle);

  Status ParseStatement(Body& body);

  Status ParseStatementBody(const std::string& tag, int line, Body& body);

  Status ParseFor(Stmt& s);

  Status ParseIf(Stmt& s);

  Status ParseSet(Stmt& s);

  Status ParseSignature(MacroDef& m);

  Result<std::shared_ptr<MacroDef>> ParseMacroBody(std::shared_ptr<MacroDef> m,
                                                   std::string_view end_tag);

  Status ParseMacro(Stmt& s);

  Status ParseCallBlock(Stmt& s);

  Status ParseWith(Stmt& s);

  // A name, `ns.attr` (with_namespace) or a parenthesised tuple of targets.
  Result<Target> ParseSimpleTarget(bool with_namespace);

  bool IsTupleEnd(std::string_view extra_end) const;

  Result<Target> ParseAssignTarget(bool with_namespace, std::string_view extra_end);

  // ---- expressions ----------------------------------------------------------

  Result<ExprPtr> ParseExpression(bool with_condexpr);

  Result<ExprPtr> ParseCondExpr();

  Result<ExprPtr> ParseOr();

  Result<ExprPtr> ParseAnd();

  Result<ExprPtr> ParseNot();

  Result<ExprPtr> ParseCompare();

  ExprPtr Binary(BinOp op, const Token& at, ExprPtr left, ExprPtr right) const;

  Result<ExprPtr> ParseMath1();

  Result<ExprPtr> ParseConcat();

  Result<ExprPtr> ParseMath2();

  Result<ExprPtr> ParsePow();

  Result<ExprPtr> ParseUnary(bool with_filter);

  Result<ExprPtr> ParsePrimary();

  Result<ExprPtr> ParseTuple(bool simplified, bool with_condexpr, std::string_view extra_end,
                             bool explicit_parens);

  Result<ExprPtr> ParseList();

  Result<ExprPtr> ParseDict();

  Result<ExprPtr> ParsePostfix(ExprPtr node);

  Result<ExprPtr> ParseFilterExpr(ExprPtr node);

  Result<ExprPtr> ParseSubscript(ExprPtr node);

  Result<ExprPtr> ParseSubscribed();

  // Parses "(args, kw=value, *dyn, **dyn_kw)" into `e`.
  Status ParseCallArgs(Expr& e);

  Result<ExprPtr> ParseCall(ExprPtr callee);

  Result<std::string> ParseDottedName();

  // `node | f(args) | g ...`; with start_inline the first '|' is implied
  // ({% filter f %}). `node` may be null (filter blocks).
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool start_inline);

  Result<ExprPtr> ParseTest(ExprPtr node);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int max_nesting_;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool soft_ = false;
  Program program_;
  std::unordered_map<std::string, int> symbol_ids_;
  std::vector<MacroDef*> macro_stack_;
  std::vector<std::vector<std::string>> end_stack_;
  std::vector<std::string> tag_stack_;
};

}  // namespace mx::jinja::parser_internal
