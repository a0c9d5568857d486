#include "runtime/jinja/expr_parser.h"

#include "absl/strings/str_cat.h"
#include "runtime/jinja/builtins.h"

namespace tessera::jinja {
std::string describe_token(const Token& t) {
  switch (t.type) {
    case TokenType::kText:
      return "template data";
    case TokenType::kVariableBegin:
      return "'{{'";
    case TokenType::kVariableEnd:
      return "end of print statement '}}'";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "end of statement block '%}'";
    case TokenType::kName:
      return absl::StrCat("'", t.value, "'");
    case TokenType::kString:
      return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat:
      return absl::StrCat("number ", t.value);
    case TokenType::kOperator:
      return absl::StrCat("'", t.value, "'");
    case TokenType::kEnd:
      return "end of template";
  }
  return "token";
}

namespace {

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

}  // namespace

// --- TokenStream ---------------------------------------------------------------------------------

absl::Status TokenStream::error(int line, std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", sv(message)));
}

absl::Status TokenStream::unsupported(int line, std::string_view what) const {
  return absl::UnimplementedError(
      absl::StrCat("chat template line ", line, ": unsupported Jinja construct: ", sv(what)));
}

absl::Status TokenStream::unexpected(std::string_view expected) const {
  return error(cur().line,
               absl::StrCat("expected ", sv(expected), ", got ", describe_token(cur())));
}

absl::Status TokenStream::expect_op(std::string_view op) {
  if (!at_op(op)) return unexpected(absl::StrCat("'", sv(op), "'"));
  next();
  return absl::OkStatus();
}

absl::Status TokenStream::expect_type(TokenType type, std::string_view what) {
  if (cur().type != type) return unexpected(what);
  next();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenStream::expect_name() {
  if (cur().type != TokenType::kName) return unexpected("a name");
  std::string name = cur().value;
  next();
  return name;
}

// --- ExprParser ----------------------------------------------------------------------------------

bool ExprParser::at_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  if (cur().type == TokenType::kVariableEnd || cur().type == TokenType::kBlockEnd ||
      cur().type == TokenType::kEnd || at_op(")")) {
    return true;
  }
  for (auto name : extra_end) {
    if (at_name(name)) return true;
  }
  return false;
}

// jinja2 parse_tuple: comma-separated expressions become a tuple.
absl::StatusOr<ExprPtr> ExprParser::parse_tuple(bool with_condexpr,
                                                std::initializer_list<std::string_view> extra_end,
                                                bool explicit_parens) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) TESSERA_RETURN_IF_ERROR(expect_op(","));
    if (at_tuple_end(extra_end)) break;
    TESSERA_ASSIGN_OR_RETURN(ExprPtr e, parse_expression(with_condexpr));
    items.push_back(std::move(e));
    if (at_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return unexpected("an expression");
  }
  auto t = make_expr(ExprKind::kTuple, line);
  t->operands = std::move(items);
  return t;
}

absl::StatusOr<ExprPtr> ExprParser::parse_expression(bool with_condexpr) {
  TokenStream::DepthGuard guard(ts_);
  if (guard.exceeded()) return error(cur().line, "expression nested too deeply");
  if (!with_condexpr) return parse_or();
  const int line = cur().line;
  TESSERA_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  while (at_name("if")) {
    next();
    auto cond = make_expr(ExprKind::kCondition, line);
    TESSERA_ASSIGN_OR_RETURN(ExprPtr test, parse_or());
    ExprPtr otherwise;
    if (at_name("else")) {
      next();
      TESSERA_ASSIGN_OR_RETURN(otherwise, parse_expression(true));
    }
    cond->operands.push_back(std::move(expr));
    cond->operands.push_back(std::move(test));
    cond->operands.push_back(std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

absl::StatusOr<ExprPtr> ExprParser::binary(ExprKind kind, std::string op, ExprPtr left,
                                           ExprPtr right, int line) {
  auto e = make_expr(kind, line);
  e->name = std::move(op);
  e->operands.push_back(std::move(left));
  e->operands.push_back(std::move(right));
  return e;
}

absl::StatusOr<ExprPtr> ExprParser::parse_or() {
  TESSERA_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (at_name("or")) {
    const int line = cur().line;
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    TESSERA_ASSIGN_OR_RETURN(left,
                             binary(ExprKind::kOr, "or", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::parse_and() {
  TESSERA_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (at_name("and")) {
    const int line = cur().line;
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    TESSERA_ASSIGN_OR_RETURN(
        left, binary(ExprKind::kAnd, "and", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::parse_not() {
  if (at_name("not")) {
    TokenStream::DepthGuard guard(ts_);
    if (guard.exceeded()) return error(cur().line, "expression nested too deeply");
    auto e = make_expr(ExprKind::kNot, cur().line);
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
    e->operands.push_back(std::move(operand));
    return e;
  }
  return parse_compare();
}

absl::StatusOr<ExprPtr> ExprParser::parse_compare() {
  const int line = cur().line;
  TESSERA_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
  ExprPtr cmp;
  for (;;) {
    std::string op;
    if (cur().type == TokenType::kOperator &&
        (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
         cur().value == ">" || cur().value == ">=")) {
      op = cur().value;
      next();
    } else if (at_name("in")) {
      op = "in";
      next();
    } else if (at_name("not") && peek().type == TokenType::kName && peek().value == "in") {
      op = "notin";
      next();
      next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = make_expr(ExprKind::kCompare, line);
      cmp->operands.push_back(std::move(first));
    }
    TESSERA_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    cmp->ops.push_back(std::move(op));
    cmp->operands.push_back(std::move(operand));
  }
  return cmp ? std::move(cmp) : std::move(first);
}

absl::StatusOr<ExprPtr> ExprParser::parse_math1() {
  TESSERA_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (at_op("+") || at_op("-")) {
    const int line = cur().line;
    std::string op = cur().value;
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr right, parse_concat());
    TESSERA_ASSIGN_OR_RETURN(
        left, binary(ExprKind::kBinary, op, std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::parse_concat() {
  const int line = cur().line;
  TESSERA_ASSIGN_OR_RETURN(ExprPtr first, parse_math2());
  if (!at_op("~")) return first;
  auto e = make_expr(ExprKind::kConcat, line);
  e->operands.push_back(std::move(first));
  while (at_op("~")) {
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr operand, parse_math2());
    e->operands.push_back(std::move(operand));
  }
  return e;
}

absl::StatusOr<ExprPtr> ExprParser::parse_math2() {
  TESSERA_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const int line = cur().line;
    std::string op = cur().value;
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr right, parse_pow());
    TESSERA_ASSIGN_OR_RETURN(
        left, binary(ExprKind::kBinary, op, std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::parse_pow() {
  TESSERA_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
  while (at_op("**")) {
    const int line = cur().line;
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr right, parse_unary(true));
    TESSERA_ASSIGN_OR_RETURN(
        left, binary(ExprKind::kBinary, "**", std::move(left), std::move(right), line));
  }
  return left;
}

// Unary minus binds tighter than filters: `-1|abs` is abs(-1), as in Jinja.
absl::StatusOr<ExprPtr> ExprParser::parse_unary(bool with_filter) {
  TokenStream::DepthGuard guard(ts_);
  if (guard.exceeded()) return error(cur().line, "expression nested too deeply");
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    node = make_expr(at_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur().line);
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node->operands.push_back(std::move(operand));
  } else {
    TESSERA_ASSIGN_OR_RETURN(node, parse_primary());
  }
  TESSERA_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    TESSERA_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ExprParser::parse_primary() {
  const Token& tok = cur();
  const int line = tok.line;
  if (tok.type == TokenType::kName) {
    auto e = make_expr(ExprKind::kLiteral, line);
    if (tok.value == "true" || tok.value == "True") {
      e->literal = Value::boolean(true);
    } else if (tok.value == "false" || tok.value == "False") {
      e->literal = Value::boolean(false);
    } else if (tok.value == "none" || tok.value == "None") {
      e->literal = Value::none();
    } else {
      e->kind = ExprKind::kName;
      e->name = tok.value;
    }
    next();
    return e;
  }
  if (tok.type == TokenType::kString) {
    std::string s;
    while (cur().type == TokenType::kString) {  // adjacent literals concatenate
      s += cur().value;
      next();
    }
    auto e = make_expr(ExprKind::kLiteral, line);
    e->literal = Value::string(std::move(s));
    return e;
  }
  if (tok.type == TokenType::kInteger || tok.type == TokenType::kFloat) {
    auto e = make_expr(ExprKind::kLiteral, line);
    e->literal = tok.type == TokenType::kInteger ? Value::integer(tok.int_value)
                                                 : Value::number(tok.float_value);
    next();
    return e;
  }
  if (at_op("(")) {
    next();
    TESSERA_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple(true, {}, true));
    TESSERA_RETURN_IF_ERROR(expect_op(")"));
    return e;
  }
  if (at_op("[")) {
    next();
    auto e = make_expr(ExprKind::kList, line);
    while (!at_op("]")) {
      if (!e->operands.empty()) TESSERA_RETURN_IF_ERROR(expect_op(","));
      if (at_op("]")) break;
      TESSERA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(true));
      e->operands.push_back(std::move(item));
    }
    next();
    return e;
  }
  if (at_op("{")) {
    next();
    auto e = make_expr(ExprKind::kDict, line);
    while (!at_op("}")) {
      if (!e->operands.empty()) TESSERA_RETURN_IF_ERROR(expect_op(","));
      if (at_op("}")) break;
      TESSERA_ASSIGN_OR_RETURN(ExprPtr key, parse_expression(true));
      TESSERA_RETURN_IF_ERROR(expect_op(":"));
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      e->operands.push_back(std::move(key));
      e->operands.push_back(std::move(value));
    }
    next();
    return e;
  }
  return unexpected("an expression");
}

absl::StatusOr<ExprPtr> ExprParser::parse_postfix(ExprPtr node) {
  for (;;) {
    if (at_op(".") || at_op("[")) {
      TESSERA_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (at_op("(")) {
      TESSERA_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExprParser::parse_filter_expr(ExprPtr node) {
  for (;;) {
    if (at_op("|")) {
      TESSERA_ASSIGN_OR_RETURN(node, parse_filter(std::move(node), false));
    } else if (at_name("is")) {
      TESSERA_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (at_op("(")) {
      TESSERA_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExprParser::parse_subscript(ExprPtr node) {
  const int line = cur().line;
  if (at_op(".")) {
    next();
    if (cur().type == TokenType::kName) {
      auto e = make_expr(ExprKind::kGetAttr, line);
      e->name = cur().value;
      e->operands.push_back(std::move(node));
      next();
      return e;
    }
    if (cur().type == TokenType::kInteger) {
      auto e = make_expr(ExprKind::kGetItem, line);
      auto key = make_expr(ExprKind::kLiteral, line);
      key->literal = Value::integer(cur().int_value);
      e->operands.push_back(std::move(node));
      e->operands.push_back(std::move(key));
      next();
      return e;
    }
    return unexpected("an attribute name");
  }
  next();  // [
  std::vector<ExprPtr> args;
  while (!at_op("]")) {
    if (!args.empty()) TESSERA_RETURN_IF_ERROR(expect_op(","));
    if (at_op("]")) break;
    TESSERA_ASSIGN_OR_RETURN(ExprPtr arg, parse_subscribed());
    args.push_back(std::move(arg));
  }
  next();
  if (args.empty()) return error(line, "empty subscript '[]'");
  ExprPtr arg;
  if (args.size() == 1) {
    arg = std::move(args[0]);
  } else {
    for (const auto& a : args) {
      if (a->kind == ExprKind::kSlice) return unsupported(line, "multi-dimensional slice");
    }
    arg = make_expr(ExprKind::kTuple, line);
    arg->operands = std::move(args);
  }
  if (arg->kind == ExprKind::kSlice) {
    arg->operands[0] = std::move(node);
    return arg;
  }
  auto e = make_expr(ExprKind::kGetItem, line);
  e->operands.push_back(std::move(node));
  e->operands.push_back(std::move(arg));
  return e;
}

// One subscript: an expression, or a slice start:stop:step (object slot left empty).
absl::StatusOr<ExprPtr> ExprParser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr start;
  if (!at_op(":")) {
    TESSERA_ASSIGN_OR_RETURN(start, parse_expression(true));
    if (!at_op(":")) return start;
  }
  next();  // first ':'
  auto slice = make_expr(ExprKind::kSlice, line);
  slice->operands.resize(4);
  slice->operands[1] = std::move(start);
  if (!at_op(":") && !at_slice_part_end()) {
    TESSERA_ASSIGN_OR_RETURN(slice->operands[2], parse_expression(true));
  }
  if (at_op(":")) {
    next();
    if (!at_slice_part_end()) {
      TESSERA_ASSIGN_OR_RETURN(slice->operands[3], parse_expression(true));
    }
  }
  return slice;
}

absl::Status ExprParser::parse_call_args(Expr& e) {
  TESSERA_RETURN_IF_ERROR(expect_op("("));
  bool first = true;
  while (!at_op(")")) {
    if (!first) {
      TESSERA_RETURN_IF_ERROR(expect_op(","));
      if (at_op(")")) break;
    }
    first = false;
    if (at_op("*") || at_op("**")) return unsupported(cur().line, "*args/**kwargs in a call");
    if (cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().value == "=") {
      std::string key = cur().value;
      next();
      next();
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      e.keywords.emplace_back(std::move(key), std::move(value));
    } else {
      if (!e.keywords.empty())
        return error(cur().line, "positional argument follows keyword argument");
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      e.operands.push_back(std::move(value));
    }
  }
  next();
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExprParser::parse_call(ExprPtr callee) {
  auto e = make_expr(ExprKind::kCall, cur().line);
  e->operands.push_back(std::move(callee));
  TESSERA_RETURN_IF_ERROR(parse_call_args(*e));
  return e;
}

absl::StatusOr<std::string> ExprParser::parse_dotted_name() {
  TESSERA_ASSIGN_OR_RETURN(std::string name, expect_name());
  while (at_op(".")) {
    next();
    TESSERA_ASSIGN_OR_RETURN(std::string part, expect_name());
    absl::StrAppend(&name, ".", part);
  }
  return name;
}

absl::StatusOr<ExprPtr> ExprParser::parse_filter(ExprPtr node, bool start_inline) {
  while (at_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = cur().line;
    TESSERA_ASSIGN_OR_RETURN(std::string name, parse_dotted_name());
    switch (filter_support(name)) {
      case Support::kSupported:
        break;
      case Support::kUnsupported:
        return unsupported(line, absl::StrCat("filter '", name, "'"));
      case Support::kUnknown:
        return error(line, absl::StrCat("no filter named '", name, "'"));
    }
    auto e = make_expr(ExprKind::kFilter, line);
    e->name = std::move(name);
    e->operands.push_back(std::move(node));
    if (at_op("(")) TESSERA_RETURN_IF_ERROR(parse_call_args(*e));
    node = std::move(e);
  }
  return node;
}

absl::StatusOr<ExprPtr> ExprParser::parse_test(ExprPtr node) {
  const int line = cur().line;
  next();  // is
  auto e = make_expr(ExprKind::kTest, line);
  if (at_name("not")) {
    next();
    e->negated = true;
  }
  TESSERA_ASSIGN_OR_RETURN(e->name, parse_dotted_name());
  switch (test_support(e->name)) {
    case Support::kSupported:
      break;
    case Support::kUnsupported:
      return unsupported(line, absl::StrCat("test '", e->name, "'"));
    case Support::kUnknown:
      return error(line, absl::StrCat("no test named '", e->name, "'"));
  }
  e->operands.push_back(std::move(node));
  if (at_op("(")) {
    TESSERA_RETURN_IF_ERROR(parse_call_args(*e));
  } else if ((cur().type == TokenType::kName || cur().type == TokenType::kString ||
              cur().type == TokenType::kInteger || cur().type == TokenType::kFloat || at_op("[") ||
              at_op("{")) &&
             !at_name("else") && !at_name("or") && !at_name("and")) {
    // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
    if (at_name("is")) return error(cur().line, "cannot chain multiple tests with 'is'");
    TESSERA_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    TESSERA_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    e->operands.push_back(std::move(arg));
  }
  return e;
}

}  // namespace tessera::jinja
