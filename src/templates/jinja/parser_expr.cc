// Expressions, following jinja2's precedence: conditional expression, or,
// and, not, comparisons, + -, ~, * / // %, **, unary - +, then primaries with
// postfix attribute / item / call and filter / test chains.
#include "templates/jinja/parser_impl.h"

namespace mx::jinja::parser_internal {

Result<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  if (with_condexpr) return ParseCondExpr();
  return ParseOr();
}

Result<ExprPtr> Parser::ParseCondExpr() {
  MX_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  ChainGuard chain(*this);
  while (IsName("if")) {
    if (!chain.Grow()) return TooDeep();
    const Token at = Cur();
    Advance();
    SoftScope soft(*this, true);
    MX_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr expr3;
    if (SkipName("else")) {
      DepthGuard guard(*this);  // `a if b else c if d else ...` recurses here
      if (guard.too_deep()) return TooDeep();
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

Result<ExprPtr> Parser::ParseOr() {
  MX_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  ChainGuard chain(*this);
  while (IsName("or")) {
    if (!chain.Grow()) return TooDeep();
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

Result<ExprPtr> Parser::ParseAnd() {
  MX_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  ChainGuard chain(*this);
  while (IsName("and")) {
    if (!chain.Grow()) return TooDeep();
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

Result<ExprPtr> Parser::ParseNot() {
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

Result<ExprPtr> Parser::ParseCompare() {
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

ExprPtr Parser::Binary(BinOp op, const Token& at, ExprPtr left, ExprPtr right) const {
  ExprPtr e = NewExpr(ExprKind::kBinary, at);
  e->bin_op = op;
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return e;
}

Result<ExprPtr> Parser::ParseMath1() {
  MX_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  ChainGuard chain(*this);
  while (IsOp("+") || IsOp("-")) {
    if (!chain.Grow()) return TooDeep();
    const Token at = Cur();
    const BinOp op = IsOp("+") ? BinOp::kAdd : BinOp::kSub;
    Advance();
    MX_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    left = Binary(op, at, std::move(left), std::move(right));
  }
  return left;
}

Result<ExprPtr> Parser::ParseConcat() {
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

Result<ExprPtr> Parser::ParseMath2() {
  MX_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  ChainGuard chain(*this);
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    if (!chain.Grow()) return TooDeep();
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

Result<ExprPtr> Parser::ParsePow() {
  MX_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  ChainGuard chain(*this);
  while (IsOp("**")) {
    if (!chain.Grow()) return TooDeep();
    const Token at = Cur();
    Advance();
    MX_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    left = Binary(BinOp::kPow, at, std::move(left), std::move(right));
  }
  return left;
}

Result<ExprPtr> Parser::ParseUnary(bool with_filter) {
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

Result<ExprPtr> Parser::ParsePrimary() {
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

Result<ExprPtr> Parser::ParseTuple(bool simplified, bool with_condexpr, std::string_view extra_end,
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

Result<ExprPtr> Parser::ParseList() {
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

Result<ExprPtr> Parser::ParseDict() {
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

Result<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  ChainGuard chain(*this);
  while (true) {
    if ((IsOp(".") || IsOp("[") || IsOp("(")) && !chain.Grow()) return TooDeep();
    if (IsOp(".") || IsOp("[")) {
      MX_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      MX_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  ChainGuard chain(*this);
  while (true) {
    if ((IsOp("|") || IsName("is") || IsOp("(")) && !chain.Grow()) return TooDeep();
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

Result<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
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

Result<ExprPtr> Parser::ParseSubscribed() {
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

Status Parser::ParseCallArgs(Expr& e) {
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

Result<ExprPtr> Parser::ParseCall(ExprPtr callee) {
  ExprPtr e = NewExpr(ExprKind::kCall, Cur());
  e->children.push_back(std::move(callee));
  MX_RETURN_IF_ERROR(ParseCallArgs(*e));
  return e;
}

Result<std::string> Parser::ParseDottedName() {
  MX_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (SkipOp(".")) {
    MX_ASSIGN_OR_RETURN(std::string part, ExpectName());
    name += "." + part;
  }
  return name;
}

Result<ExprPtr> Parser::ParseFilterChain(ExprPtr node, bool start_inline) {
  ChainGuard chain(*this);
  while (IsOp("|") || start_inline) {
    if (!chain.Grow()) return TooDeep();
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

Result<ExprPtr> Parser::ParseTest(ExprPtr node) {
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
              type == TokenType::kInteger || type == TokenType::kFloat || IsOp("[") || IsOp("{")) &&
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

}  // namespace mx::jinja::parser_internal
