#include "templates/jinja/parser.h"

#include <algorithm>
#include <unordered_map>

namespace mx::jinja {
namespace {

const char* DescribeType(TokenType t) {
  switch (t) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVarBegin:
      return "begin of print statement";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return "name";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return "operator";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

std::string Describe(const Token& t) {
  if (t.type == TokenType::kName || t.type == TokenType::kOperator) return t.text;
  return DescribeType(t.type);
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting)
      : tokens_(std::move(tokens)), max_nesting_(max_nesting) {}

  Result<Program> Run() {
    program_.loop_symbol = Symbol("loop");
    program_.varargs_symbol = Symbol("varargs");
    program_.kwargs_symbol = Symbol("kwargs");
    program_.caller_symbol = Symbol("caller");
    MX_ASSIGN_OR_RETURN(program_.body, Subparse({}));
    return std::move(program_);
  }

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

  Status Fail(const std::string& msg, int line = 0) const {
    return Status::InvalidArgument("line " + std::to_string(line ? line : Cur().line) + ": " + msg);
  }
  Status ExpectOp(std::string_view op) {
    if (SkipOp(op)) return Status::Ok();
    return Fail("expected token '" + std::string(op) + "', got '" + Describe(Cur()) + "'");
  }
  Status ExpectType(TokenType type) {
    if (Cur().type == type) {
      Advance();
      return Status::Ok();
    }
    return Fail("expected token '" + std::string(DescribeType(type)) + "', got '" +
                Describe(Cur()) + "'");
  }
  Result<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) {
      return Fail("expected token 'name', got '" + Describe(Cur()) + "'");
    }
    std::string name = Cur().text;
    Advance();
    return name;
  }

  int Symbol(const std::string& name) {
    auto it = symbol_ids_.find(name);
    if (it != symbol_ids_.end()) return it->second;
    const int id = static_cast<int>(program_.symbols.size());
    program_.symbols.push_back(name);
    symbol_ids_.emplace(name, id);
    return id;
  }

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

  static std::string JoinTags(const std::vector<std::string>& tags) {
    std::string out;
    for (size_t i = 0; i < tags.size(); ++i) {
      if (i) out += " or ";
      out += "'" + tags[i] + "'";
    }
    return out;
  }

  Status FailEof(int line) const {
    std::string msg = "Unexpected end of template.";
    if (!end_stack_.empty()) {
      msg += " Jinja was looking for the following tags: " + JoinTags(end_stack_.back()) + ".";
    }
    if (!tag_stack_.empty()) {
      msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    }
    return Fail(msg, line);
  }

  Status FailUnknownTag(const std::string& name, int line) const {
    std::string msg = "Encountered unknown tag '" + name + "'.";
    if (!end_stack_.empty()) {
      bool expected = false;
      for (const auto& tags : end_stack_) {
        expected = expected || std::find(tags.begin(), tags.end(), name) != tags.end();
      }
      if (expected) {
        msg +=
            " You probably made a nesting mistake. Jinja is expecting this tag, but currently "
            "looking for " +
            JoinTags(end_stack_.back()) + ".";
      } else {
        msg += " Jinja was looking for the following tags: " + JoinTags(end_stack_.back()) + ".";
      }
    }
    if (!tag_stack_.empty()) {
      msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    }
    return Fail(msg, line);
  }

  // Parses template data, prints and statements until a block tag whose name is
  // one of `end_tags` (left as the current token) or the end of the template.
  Result<Body> Subparse(std::initializer_list<std::string_view> end_tags) {
    DepthGuard guard(*this);
    if (guard.too_deep()) return TooDeep();
    const bool has_end = end_tags.size() > 0;
    if (has_end) end_stack_.emplace_back(end_tags.begin(), end_tags.end());
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) break;
      if (t.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kData;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        Advance();
      } else if (t.type == TokenType::kVarBegin) {
        Advance();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = Cur().line;
        MX_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(/*simplified=*/false, /*with_condexpr=*/true, {},
                                                  /*explicit_parens=*/false));
        s->exprs.push_back(std::move(e));
        MX_RETURN_IF_ERROR(ExpectType(TokenType::kVarEnd));
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        Advance();
        if (has_end && AtEndTag(end_tags)) {
          end_stack_.pop_back();
          return body;
        }
        MX_RETURN_IF_ERROR(ParseStatement(body));
        MX_RETURN_IF_ERROR(ExpectType(TokenType::kBlockEnd));
      } else {
        return Fail("unexpected '" + Describe(t) + "'");
      }
    }
    if (has_end) end_stack_.pop_back();
    return body;
  }

  // jinja2's parse_statements: optional ':', the end of the opening tag, the
  // body up to one of `end_tags`; with `drop_needle` the end tag is consumed.
  Result<Body> ParseStatements(std::initializer_list<std::string_view> end_tags, bool drop_needle) {
    const int line = Cur().line;
    SkipOp(":");
    MX_RETURN_IF_ERROR(ExpectType(TokenType::kBlockEnd));
    std::vector<std::string> tags(end_tags.begin(), end_tags.end());
    MX_ASSIGN_OR_RETURN(Body body, Subparse(end_tags));
    if (Cur().type == TokenType::kEof) {
      end_stack_.push_back(tags);
      Status st = FailEof(line);
      end_stack_.pop_back();
      return st;
    }
    if (drop_needle) Advance();
    return body;
  }

  Status ParseStatement(Body& body) {
    const Token& t = Cur();
    if (t.type != TokenType::kName) return Fail("tag name expected");
    const std::string tag = t.text;
    const int line = t.line;
    static constexpr std::string_view kUnsupported[] = {"block",  "extends", "include",
                                                        "import", "from",    "autoescape"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) !=
        std::end(kUnsupported)) {
      return Status::NotSupported("line " + std::to_string(line) + ": tag '" + tag +
                                  "' is not supported (chat templates are rendered standalone)");
    }
    static constexpr std::string_view kKnown[] = {"for",   "if",       "set",       "macro",
                                                  "call",  "filter",   "with",      "print",
                                                  "break", "continue", "generation"};
    if (std::find(std::begin(kKnown), std::end(kKnown), tag) == std::end(kKnown)) {
      return FailUnknownTag(tag, line);
    }
    tag_stack_.push_back(tag);
    Status st = ParseStatementBody(tag, line, body);
    tag_stack_.pop_back();
    return st;
  }

  Status ParseStatementBody(const std::string& tag, int line, Body& body) {
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "for") {
      MX_RETURN_IF_ERROR(ParseFor(*s));
    } else if (tag == "if") {
      MX_RETURN_IF_ERROR(ParseIf(*s));
    } else if (tag == "set") {
      MX_RETURN_IF_ERROR(ParseSet(*s));
    } else if (tag == "macro") {
      MX_RETURN_IF_ERROR(ParseMacro(*s));
    } else if (tag == "call") {
      MX_RETURN_IF_ERROR(ParseCallBlock(*s));
    } else if (tag == "filter") {
      Advance();
      s->kind = StmtKind::kFilterBlock;
      MX_ASSIGN_OR_RETURN(s->filter, ParseFilterChain(nullptr, /*start_inline=*/true));
      SoftScope soft(*this, false);
      MX_ASSIGN_OR_RETURN(s->body, ParseStatements({"endfilter"}, true));
    } else if (tag == "with") {
      MX_RETURN_IF_ERROR(ParseWith(*s));
    } else if (tag == "print") {
      Advance();
      bool first = true;
      while (Cur().type != TokenType::kBlockEnd) {
        if (!first) MX_RETURN_IF_ERROR(ExpectOp(","));
        first = false;
        auto out = std::make_unique<Stmt>();
        out->kind = StmtKind::kOutput;
        out->line = Cur().line;
        MX_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
        out->exprs.push_back(std::move(e));
        body.push_back(std::move(out));
      }
      return Status::Ok();
    } else if (tag == "break" || tag == "continue") {
      Advance();
      if (loop_depth_ == 0) return Fail("'" + tag + "' outside of a loop", line);
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    } else if (tag == "generation") {
      Advance();
      s->kind = StmtKind::kScope;
      SoftScope soft(*this, false);
      MX_ASSIGN_OR_RETURN(s->body, ParseStatements({"endgeneration"}, true));
    } else {
      return FailUnknownTag(tag, line);
    }
    body.push_back(std::move(s));
    return Status::Ok();
  }

  Status ParseFor(Stmt& s) {
    Advance();
    s.kind = StmtKind::kFor;
    MX_ASSIGN_OR_RETURN(s.target, ParseAssignTarget(false, "in"));
    if (!SkipName("in")) return Fail("expected token 'in', got '" + Describe(Cur()) + "'");
    MX_ASSIGN_OR_RETURN(ExprPtr iter,
                        ParseTuple(false, /*with_condexpr=*/false, "recursive", false));
    s.exprs.push_back(std::move(iter));
    ExprPtr test;
    if (SkipName("if")) {
      MX_ASSIGN_OR_RETURN(test, ParseExpression(true));
    }
    s.exprs.push_back(std::move(test));
    s.recursive = SkipName("recursive");
    SoftScope soft(*this, false);
    ++loop_depth_;
    auto body = ParseStatements({"endfor", "else"}, false);
    if (!body.ok()) return body.status();
    s.body = std::move(body).value();
    const bool has_else = IsName("else");
    Advance();
    if (has_else) {
      auto else_body = ParseStatements({"endfor"}, true);
      if (!else_body.ok()) return else_body.status();
      s.else_body = std::move(else_body).value();
    }
    --loop_depth_;
    return Status::Ok();
  }

  Status ParseIf(Stmt& s) {
    Advance();
    SoftScope soft(*this, true);
    s.kind = StmtKind::kIf;
    Stmt* node = &s;
    while (true) {
      MX_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, /*with_condexpr=*/false, {}, false));
      node->exprs.push_back(std::move(test));
      MX_ASSIGN_OR_RETURN(node->body, ParseStatements({"elif", "else", "endif"}, false));
      if (IsName("elif")) {
        Advance();
        auto elif = std::make_unique<Stmt>();
        elif->kind = StmtKind::kIf;
        elif->line = Cur().line;
        Stmt* next = elif.get();
        node->else_body.push_back(std::move(elif));
        node = next;
        continue;
      }
      if (IsName("else")) {
        Advance();
        MX_ASSIGN_OR_RETURN(node->else_body, ParseStatements({"endif"}, true));
        return Status::Ok();
      }
      Advance();  // endif
      return Status::Ok();
    }
  }

  Status ParseSet(Stmt& s) {
    Advance();
    MX_ASSIGN_OR_RETURN(s.target, ParseAssignTarget(true, {}));
    if (SkipOp("=")) {
      s.kind = StmtKind::kSet;
      MX_ASSIGN_OR_RETURN(ExprPtr value, ParseTuple(false, true, {}, false));
      s.exprs.push_back(std::move(value));
      return Status::Ok();
    }
    s.kind = StmtKind::kSetBlock;
    if (s.target.kind == Target::Kind::kTuple) return Fail("expected token '='", s.line);
    if (IsOp("|")) {
      MX_ASSIGN_OR_RETURN(s.filter, ParseFilterChain(nullptr, false));
    }
    SoftScope soft(*this, false);
    MX_ASSIGN_OR_RETURN(s.body, ParseStatements({"endset"}, true));
    return Status::Ok();
  }

  Status ParseSignature(MacroDef& m) {
    MX_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!m.params.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      MX_ASSIGN_OR_RETURN(std::string name, ExpectName());
      if (SkipOp("=")) {
        MX_ASSIGN_OR_RETURN(ExprPtr d, ParseExpression(true));
        m.defaults.push_back(std::move(d));
      } else if (!m.defaults.empty()) {
        return Fail("non-default argument follows default argument");
      }
      m.param_symbols.push_back(Symbol(name));
      m.params.push_back(std::move(name));
    }
    return ExpectOp(")");
  }

  Result<std::shared_ptr<MacroDef>> ParseMacroBody(std::shared_ptr<MacroDef> m,
                                                   std::string_view end_tag) {
    macro_stack_.push_back(m.get());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    SoftScope soft(*this, false);
    auto body = end_tag == "endmacro" ? ParseStatements({"endmacro"}, true)
                                      : ParseStatements({"endcall"}, true);
    loop_depth_ = saved_loop_depth;
    macro_stack_.pop_back();
    if (!body.ok()) return body.status();
    m->body = std::move(body).value();
    return m;
  }

  Status ParseMacro(Stmt& s) {
    Advance();
    s.kind = StmtKind::kMacro;
    auto m = std::make_shared<MacroDef>();
    m->line = s.line;
    MX_ASSIGN_OR_RETURN(m->name, ExpectName());
    s.target.kind = Target::Kind::kName;
    s.target.name = m->name;
    s.target.symbol = Symbol(m->name);
    MX_RETURN_IF_ERROR(ParseSignature(*m));
    MX_ASSIGN_OR_RETURN(s.macro, ParseMacroBody(std::move(m), "endmacro"));
    return Status::Ok();
  }

  Status ParseCallBlock(Stmt& s) {
    Advance();
    s.kind = StmtKind::kCallBlock;
    auto m = std::make_shared<MacroDef>();
    m->name = "caller";
    m->line = s.line;
    if (IsOp("(")) MX_RETURN_IF_ERROR(ParseSignature(*m));
    MX_ASSIGN_OR_RETURN(ExprPtr call, ParseExpression(true));
    if (call->kind != ExprKind::kCall) return Fail("expected call", s.line);
    s.exprs.push_back(std::move(call));
    MX_ASSIGN_OR_RETURN(s.macro, ParseMacroBody(std::move(m), "endcall"));
    return Status::Ok();
  }

  Status ParseWith(Stmt& s) {
    Advance();
    s.kind = StmtKind::kWith;
    while (Cur().type != TokenType::kBlockEnd) {
      if (!s.targets.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      MX_ASSIGN_OR_RETURN(Target t, ParseAssignTarget(false, {}));
      if (t.kind == Target::Kind::kNamespaceAttr) return Fail("can't assign to namespace here");
      MX_RETURN_IF_ERROR(ExpectOp("="));
      MX_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      s.targets.push_back(std::move(t));
      s.exprs.push_back(std::move(v));
    }
    SoftScope soft(*this, false);
    MX_ASSIGN_OR_RETURN(s.body, ParseStatements({"endwith"}, true));
    return Status::Ok();
  }

  // A name, `ns.attr` (with_namespace) or a parenthesised tuple of targets.
  Result<Target> ParseSimpleTarget(bool with_namespace) {
    Target t;
    t.line = Cur().line;
    if (SkipOp("(")) {
      DepthGuard guard(*this);
      if (guard.too_deep()) return TooDeep();
      MX_ASSIGN_OR_RETURN(t, ParseAssignTarget(with_namespace, {}));
      MX_RETURN_IF_ERROR(ExpectOp(")"));
      return t;
    }
    if (Cur().type != TokenType::kName) {
      const bool literal = Cur().type == TokenType::kString || Cur().type == TokenType::kInteger ||
                           Cur().type == TokenType::kFloat;
      return Fail("can't assign to '" + (literal ? std::string("const") : Describe(Cur())) + "'");
    }
    const std::string& n = Cur().text;
    if (n == "true" || n == "false" || n == "True" || n == "False" || n == "none" || n == "None") {
      return Fail("can't assign to 'const'");
    }
    t.name = n;
    t.symbol = Symbol(n);
    Advance();
    if (with_namespace && IsOp(".")) {
      Advance();
      MX_ASSIGN_OR_RETURN(t.attr, ExpectName());
      t.kind = Target::Kind::kNamespaceAttr;
    }
    return t;
  }

  bool IsTupleEnd(std::string_view extra_end) const {
    const TokenType type = Cur().type;
    if (type == TokenType::kVarEnd || type == TokenType::kBlockEnd || IsOp(")")) return true;
    return !extra_end.empty() && IsName(extra_end);
  }

  Result<Target> ParseAssignTarget(bool with_namespace, std::string_view extra_end) {
    Target tuple;
    tuple.kind = Target::Kind::kTuple;
    tuple.line = Cur().line;
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra_end)) break;
      MX_ASSIGN_OR_RETURN(Target item, ParseSimpleTarget(with_namespace));
      tuple.items.push_back(std::move(item));
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (tuple.items.empty()) return Fail("expected an assignment target");
      return std::move(tuple.items[0]);
    }
    return tuple;
  }

  // ---- expressions ----------------------------------------------------------

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    if (with_condexpr) return ParseCondExpr();
    return ParseOr();
  }

  Result<ExprPtr> ParseCondExpr() {
    MX_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
    while (IsName("if")) {
      const Token at = Cur();
      Advance();
      SoftScope soft(*this, true);
      MX_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr expr3;
      if (SkipName("else")) {
        MX_ASSIGN_OR_RETURN(expr3, ParseCondExpr());
      }
      ExprPtr e = NewExpr(ExprKind::kCondExpr, at);
      e->children.push_back(std::move(cond));
      e->children.push_back(std::move(expr1));
      e->children.push_back(std::move(expr3));
      expr1 = std::move(e);
    }
    return expr1;
  }

  Result<ExprPtr> ParseOr() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const Token at = Cur();
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      ExprPtr e = NewExpr(ExprKind::kOr, at);
      e->children.push_back(std::move(left));
      e->children.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const Token at = Cur();
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      ExprPtr e = NewExpr(ExprKind::kAnd, at);
      e->children.push_back(std::move(left));
      e->children.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(*this);
      if (guard.too_deep()) return TooDeep();
      const Token at = Cur();
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      ExprPtr e = NewExpr(ExprKind::kNot, at);
      e->children.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    const Token at = Cur();
    MX_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      CmpOp op;
      if (IsOp("==")) {
        op = CmpOp::kEq;
      } else if (IsOp("!=")) {
        op = CmpOp::kNe;
      } else if (IsOp("<")) {
        op = CmpOp::kLt;
      } else if (IsOp("<=")) {
        op = CmpOp::kLe;
      } else if (IsOp(">")) {
        op = CmpOp::kGt;
      } else if (IsOp(">=")) {
        op = CmpOp::kGe;
      } else if (IsName("in")) {
        op = CmpOp::kIn;
      } else if (IsName("not") && Look().type == TokenType::kName && Look().text == "in") {
        op = CmpOp::kNotIn;
        Advance();
      } else {
        break;
      }
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      if (!cmp) {
        cmp = NewExpr(ExprKind::kCompare, at);
        cmp->children.push_back(std::move(first));
      }
      cmp->cmp_ops.push_back(op);
      cmp->children.push_back(std::move(operand));
    }
    if (cmp) return cmp;
    return first;
  }

  ExprPtr Binary(BinOp op, const Token& at, ExprPtr left, ExprPtr right) const {
    ExprPtr e = NewExpr(ExprKind::kBinary, at);
    e->bin_op = op;
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  Result<ExprPtr> ParseMath1() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token at = Cur();
      const BinOp op = IsOp("+") ? BinOp::kAdd : BinOp::kSub;
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(op, at, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseConcat() {
    const Token at = Cur();
    MX_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
    if (!IsOp("~")) return first;
    ExprPtr e = NewExpr(ExprKind::kConcat, at);
    e->children.push_back(std::move(first));
    while (SkipOp("~")) {
      MX_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
      e->children.push_back(std::move(next));
    }
    return e;
  }

  Result<ExprPtr> ParseMath2() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token at = Cur();
      const BinOp op = IsOp("*")    ? BinOp::kMul
                       : IsOp("/")  ? BinOp::kDiv
                       : IsOp("//") ? BinOp::kFloorDiv
                                    : BinOp::kMod;
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(op, at, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParsePow() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      const Token at = Cur();
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Binary(BinOp::kPow, at, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(*this);
    if (guard.too_deep()) return TooDeep();
    const Token at = Cur();
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const ExprKind kind = IsOp("-") ? ExprKind::kNeg : ExprKind::kPos;
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node = NewExpr(kind, at);
      node->children.push_back(std::move(operand));
    } else {
      MX_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    MX_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      MX_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    if (t.type == TokenType::kName) {
      ExprPtr e = NewExpr(ExprKind::kConst, t);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::None();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
        e->symbol = Symbol(t.text);
        for (MacroDef* m : macro_stack_) {
          m->uses_caller = m->uses_caller || t.text == "caller";
          m->uses_varargs = m->uses_varargs || t.text == "varargs";
          m->uses_kwargs = m->uses_kwargs || t.text == "kwargs";
        }
      }
      Advance();
      return e;
    }
    if (t.type == TokenType::kString) {
      ExprPtr e = NewExpr(ExprKind::kConst, t);
      std::string s;
      while (Cur().type == TokenType::kString) {
        s += Cur().text;
        Advance();
      }
      e->value = Value::String(std::move(s));
      return e;
    }
    if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
      ExprPtr e = NewExpr(ExprKind::kConst, t);
      e->value =
          t.type == TokenType::kInteger ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Advance();
      return e;
    }
    if (IsOp("(")) {
      Advance();
      MX_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(false, true, {}, /*explicit_parens=*/true));
      MX_RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp("[")) return ParseList();
    if (IsOp("{")) return ParseDict();
    return Fail("unexpected '" + Describe(t) + "'");
  }

  Result<ExprPtr> ParseTuple(bool simplified, bool with_condexpr, std::string_view extra_end,
                             bool explicit_parens) {
    const Token at = Cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra_end)) break;
      ExprPtr item;
      if (simplified) {
        MX_ASSIGN_OR_RETURN(item, ParsePrimary());
      } else {
        MX_ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
      }
      items.push_back(std::move(item));
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) {
        return Fail("Expected an expression, got '" + Describe(Cur()) + "'");
      }
    }
    ExprPtr e = NewExpr(ExprKind::kTuple, at);
    e->children = std::move(items);
    return e;
  }

  Result<ExprPtr> ParseList() {
    ExprPtr e = NewExpr(ExprKind::kList, Cur());
    Advance();  // [
    while (!IsOp("]")) {
      if (!e->children.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      MX_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      e->children.push_back(std::move(item));
    }
    MX_RETURN_IF_ERROR(ExpectOp("]"));
    return e;
  }

  Result<ExprPtr> ParseDict() {
    ExprPtr e = NewExpr(ExprKind::kDict, Cur());
    Advance();  // {
    while (!IsOp("}")) {
      if (!e->children.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      MX_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
      MX_RETURN_IF_ERROR(ExpectOp(":"));
      MX_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      e->children.push_back(std::move(key));
      e->children.push_back(std::move(value));
    }
    MX_RETURN_IF_ERROR(ExpectOp("}"));
    return e;
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".") || IsOp("[")) {
        MX_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        MX_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        MX_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node), false));
      } else if (IsName("is")) {
        MX_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        MX_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr node) {
    const Token at = Cur();
    if (SkipOp(".")) {
      const Token& attr = Cur();
      if (attr.type == TokenType::kName) {
        ExprPtr e = NewExpr(ExprKind::kGetAttr, at);
        e->name = attr.text;
        e->children.push_back(std::move(node));
        Advance();
        return e;
      }
      if (attr.type != TokenType::kInteger) return Fail("expected name or number");
      ExprPtr index = NewExpr(ExprKind::kConst, attr);
      index->value = Value::Int(attr.int_value);
      Advance();
      ExprPtr e = NewExpr(ExprKind::kGetItem, at);
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(index));
      return e;
    }
    Advance();  // [
    std::vector<ExprPtr> args;
    while (!IsOp("]")) {
      if (!args.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      MX_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
      args.push_back(std::move(arg));
    }
    MX_RETURN_IF_ERROR(ExpectOp("]"));
    ExprPtr e = NewExpr(ExprKind::kGetItem, at);
    e->children.push_back(std::move(node));
    if (args.size() == 1) {
      e->children.push_back(std::move(args[0]));
    } else {
      ExprPtr tuple = NewExpr(ExprKind::kTuple, at);
      tuple->children = std::move(args);
      e->children.push_back(std::move(tuple));
    }
    return e;
  }

  Result<ExprPtr> ParseSubscribed() {
    const Token at = Cur();
    ExprPtr start;
    if (!IsOp(":")) {
      MX_ASSIGN_OR_RETURN(start, ParseExpression(true));
      if (!IsOp(":")) return start;
    }
    Advance();  // :
    ExprPtr slice = NewExpr(ExprKind::kSlice, at);
    ExprPtr stop, step;
    if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
      MX_ASSIGN_OR_RETURN(stop, ParseExpression(true));
    }
    if (SkipOp(":")) {
      if (!IsOp("]") && !IsOp(",")) {
        MX_ASSIGN_OR_RETURN(step, ParseExpression(true));
      }
    }
    slice->children.push_back(std::move(start));
    slice->children.push_back(std::move(stop));
    slice->children.push_back(std::move(step));
    return slice;
  }

  // Parses "(args, kw=value, *dyn, **dyn_kw)" into `e`.
  Status ParseCallArgs(Expr& e) {
    const int line = Cur().line;
    MX_RETURN_IF_ERROR(ExpectOp("("));
    bool require_comma = false;
    auto invalid = [&] { return Fail("invalid syntax for function call expression", line); };
    while (!IsOp(")")) {
      if (require_comma) {
        MX_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      if (IsOp("*")) {
        if (e.dyn_args || e.dyn_kwargs) return invalid();
        Advance();
        MX_ASSIGN_OR_RETURN(e.dyn_args, ParseExpression(true));
      } else if (IsOp("**")) {
        if (e.dyn_kwargs) return invalid();
        Advance();
        MX_ASSIGN_OR_RETURN(e.dyn_kwargs, ParseExpression(true));
      } else if (Cur().type == TokenType::kName && Look().type == TokenType::kOperator &&
                 Look().text == "=") {
        if (e.dyn_kwargs) return invalid();
        std::string key = Cur().text;
        Advance();
        Advance();
        MX_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e.kwargs.push_back(Keyword{std::move(key), std::move(value)});
      } else {
        if (e.dyn_args || e.dyn_kwargs || !e.kwargs.empty()) return invalid();
        MX_ASSIGN_OR_RETURN(ExprPtr arg, ParseExpression(true));
        e.children.push_back(std::move(arg));
      }
      require_comma = true;
    }
    return ExpectOp(")");
  }

  Result<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr e = NewExpr(ExprKind::kCall, Cur());
    e->children.push_back(std::move(callee));
    MX_RETURN_IF_ERROR(ParseCallArgs(*e));
    return e;
  }

  Result<std::string> ParseDottedName() {
    MX_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (SkipOp(".")) {
      MX_ASSIGN_OR_RETURN(std::string part, ExpectName());
      name += "." + part;
    }
    return name;
  }

  // `node | f(args) | g ...`; with start_inline the first '|' is implied
  // ({% filter f %}). `node` may be null (filter blocks).
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Advance();
      start_inline = false;
      const Token at = Cur();
      MX_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
      ExprPtr e = NewExpr(ExprKind::kFilter, at);
      e->children.push_back(std::move(node));
      e->filter = FindFilter(name);
      if (e->filter == nullptr && !soft_) return Fail("No filter named '" + name + "'.", at.line);
      e->name = std::move(name);
      if (IsOp("(")) MX_RETURN_IF_ERROR(ParseCallArgs(*e));
      node = std::move(e);
    }
    return node;
  }

  Result<ExprPtr> ParseTest(ExprPtr node) {
    const Token at = Cur();
    Advance();  // is
    const bool negated = SkipName("not");
    MX_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    ExprPtr e = NewExpr(ExprKind::kTest, at);
    e->children.push_back(std::move(node));
    e->test = FindTest(name);
    if (e->test == nullptr && !soft_) return Fail("No test named '" + name + "'.", at.line);
    e->name = std::move(name);
    const TokenType type = Cur().type;
    if (IsOp("(")) {
      MX_RETURN_IF_ERROR(ParseCallArgs(*e));
    } else if ((type == TokenType::kName || type == TokenType::kString ||
                type == TokenType::kInteger || type == TokenType::kFloat || IsOp("[") ||
                IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Fail("You cannot chain multiple tests with is");
      MX_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      MX_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->children.push_back(std::move(arg));
    }
    if (!negated) return e;
    ExprPtr n = NewExpr(ExprKind::kNot, at);
    n->children.push_back(std::move(e));
    return n;
  }

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

}  // namespace

Result<Program> ParseProgram(std::vector<Token> tokens, int max_nesting) {
  if (tokens.empty() || tokens.back().type != TokenType::kEof) {
    return Status::Internal("token stream must end with kEof");
  }
  return Parser(std::move(tokens), max_nesting).Run();
}

}  // namespace mx::jinja
