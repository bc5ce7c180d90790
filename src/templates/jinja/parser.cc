#include "templates/jinja/parser.h"

#include "templates/jinja/parser_impl.h"

namespace mx::jinja {
namespace parser_internal {

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

// ---- token stream and statements --------------------------------------------

Result<Program> Parser::Run() {
  program_.loop_symbol = Symbol("loop");
  program_.varargs_symbol = Symbol("varargs");
  program_.kwargs_symbol = Symbol("kwargs");
  program_.caller_symbol = Symbol("caller");
  MX_ASSIGN_OR_RETURN(program_.body, Subparse({}));
  return std::move(program_);
}

Status Parser::Fail(const std::string& msg, int line) const {
  return Status::InvalidArgument("line " + std::to_string(line ? line : Cur().line) + ": " + msg);
}

Status Parser::ExpectOp(std::string_view op) {
  if (SkipOp(op)) return Status::Ok();
  return Fail("expected token '" + std::string(op) + "', got '" + Describe(Cur()) + "'");
}

Status Parser::ExpectType(TokenType type) {
  if (Cur().type == type) {
    Advance();
    return Status::Ok();
  }
  return Fail("expected token '" + std::string(DescribeType(type)) + "', got '" + Describe(Cur()) +
              "'");
}

Result<std::string> Parser::ExpectName() {
  if (Cur().type != TokenType::kName) {
    return Fail("expected token 'name', got '" + Describe(Cur()) + "'");
  }
  std::string name = Cur().text;
  Advance();
  return name;
}

int Parser::Symbol(const std::string& name) {
  auto it = symbol_ids_.find(name);
  if (it != symbol_ids_.end()) return it->second;
  const int id = static_cast<int>(program_.symbols.size());
  program_.symbols.push_back(name);
  symbol_ids_.emplace(name, id);
  return id;
}

std::string Parser::JoinTags(const std::vector<std::string>& tags) {
  std::string out;
  for (size_t i = 0; i < tags.size(); ++i) {
    if (i) out += " or ";
    out += "'" + tags[i] + "'";
  }
  return out;
}

Status Parser::FailEof(int line) const {
  std::string msg = "Unexpected end of template.";
  if (!end_stack_.empty()) {
    msg += " Jinja was looking for the following tags: " + JoinTags(end_stack_.back()) + ".";
  }
  if (!tag_stack_.empty()) {
    msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
  }
  return Fail(msg, line);
}

Status Parser::FailUnknownTag(const std::string& name, int line) const {
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

Result<Body> Parser::Subparse(std::initializer_list<std::string_view> end_tags) {
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

Result<Body> Parser::ParseStatements(std::initializer_list<std::string_view> end_tags,
                                     bool drop_needle) {
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

Status Parser::ParseStatement(Body& body) {
  const Token& t = Cur();
  if (t.type != TokenType::kName) return Fail("tag name expected");
  const std::string tag = t.text;
  const int line = t.line;
  static constexpr std::string_view kUnsupported[] = {"block",  "extends", "include",
                                                      "import", "from",    "autoescape"};
  if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) != std::end(kUnsupported)) {
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

Status Parser::ParseStatementBody(const std::string& tag, int line, Body& body) {
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

Status Parser::ParseFor(Stmt& s) {
  Advance();
  s.kind = StmtKind::kFor;
  MX_ASSIGN_OR_RETURN(s.target, ParseAssignTarget(false, "in"));
  if (!SkipName("in")) return Fail("expected token 'in', got '" + Describe(Cur()) + "'");
  MX_ASSIGN_OR_RETURN(ExprPtr iter, ParseTuple(false, /*with_condexpr=*/false, "recursive", false));
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

Status Parser::ParseIf(Stmt& s) {
  Advance();
  SoftScope soft(*this, true);
  s.kind = StmtKind::kIf;
  // if / elif / elif ... are one node with a branch per test (no nesting).
  while (true) {
    MX_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, /*with_condexpr=*/false, {}, false));
    s.exprs.push_back(std::move(test));
    MX_ASSIGN_OR_RETURN(Body body, ParseStatements({"elif", "else", "endif"}, false));
    s.branches.push_back(std::move(body));
    if (SkipName("elif")) continue;
    if (SkipName("else")) {
      MX_ASSIGN_OR_RETURN(s.else_body, ParseStatements({"endif"}, true));
      return Status::Ok();
    }
    Advance();  // endif
    return Status::Ok();
  }
}

Status Parser::ParseSet(Stmt& s) {
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

Status Parser::ParseSignature(MacroDef& m) {
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

Result<std::shared_ptr<MacroDef>> Parser::ParseMacroBody(std::shared_ptr<MacroDef> m,
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

Status Parser::ParseMacro(Stmt& s) {
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

Status Parser::ParseCallBlock(Stmt& s) {
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

Status Parser::ParseWith(Stmt& s) {
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

Result<Target> Parser::ParseSimpleTarget(bool with_namespace) {
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

bool Parser::IsTupleEnd(std::string_view extra_end) const {
  const TokenType type = Cur().type;
  if (type == TokenType::kVarEnd || type == TokenType::kBlockEnd || IsOp(")")) return true;
  return !extra_end.empty() && IsName(extra_end);
}

Result<Target> Parser::ParseAssignTarget(bool with_namespace, std::string_view extra_end) {
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

}  // namespace parser_internal

Result<Program> ParseProgram(std::vector<Token> tokens, int max_nesting) {
  if (tokens.empty() || tokens.back().type != TokenType::kEof) {
    return Status::Internal("token stream must end with kEof");
  }
  return parser_internal::Parser(std::move(tokens), max_nesting).Run();
}

}  // namespace mx::jinja
