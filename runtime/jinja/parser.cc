#include "runtime/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/jinja/expr_parser.h"
#include "runtime/jinja/lexer.h"

namespace tessera::jinja {
namespace {

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

// Statements (jinja2/parser.py parse_statements and the parse_<tag> functions); expressions are
// delegated to ExprParser.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : ts_(std::move(tokens)), expr_(ts_) {}

  absl::StatusOr<std::unique_ptr<TemplateAst>> run() {
    auto ast = std::make_unique<TemplateAst>();
    TESSERA_RETURN_IF_ERROR(parse_body(ast->body, {}, "", 0));
    return ast;
  }

 private:
  const Token& cur() const { return ts_.cur(); }
  const Token& peek() const { return ts_.peek(); }
  void next() { ts_.next(); }
  bool at_op(std::string_view op) const { return ts_.at_op(op); }
  bool at_name(std::string_view name) const { return ts_.at_name(name); }
  absl::Status error(int line, std::string_view message) const { return ts_.error(line, message); }
  absl::Status unsupported(int line, std::string_view what) const {
    return ts_.unsupported(line, what);
  }
  absl::Status unexpected(std::string_view expected) const { return ts_.unexpected(expected); }
  absl::Status expect_op(std::string_view op) { return ts_.expect_op(op); }
  absl::StatusOr<std::string> expect_name() { return ts_.expect_name(); }
  absl::Status expect_block_end() {
    return ts_.expect_type(TokenType::kBlockEnd, "end of statement block '%}'");
  }

  // --- statements --------------------------------------------------------------------------------

  // Parses statements until a block tag named in `end_tags`; leaves the cursor on that tag's
  // name. At top level (`end_tags` empty) it runs to the end of the template.
  absl::Status parse_body(Body& out, std::initializer_list<std::string_view> end_tags,
                          std::string_view opener, int opener_line) {
    TokenStream::DepthGuard guard(ts_);
    if (guard.exceeded()) return error(cur().line, "blocks nested too deeply");
    for (;;) {
      const Token& tok = cur();
      switch (tok.type) {
        case TokenType::kEnd:
          if (end_tags.size() == 0) return absl::OkStatus();
          return error(opener_line,
                       absl::StrCat("unclosed '", sv(opener), "' block: expected ",
                                    quoted_list(end_tags), " before the end of the template"));
        case TokenType::kText: {
          auto s = make_stmt(StmtKind::kText, tok.line);
          s->text = tok.value;
          out.push_back(std::move(s));
          next();
          break;
        }
        case TokenType::kVariableBegin: {
          auto s = make_stmt(StmtKind::kOutput, tok.line);
          next();
          TESSERA_ASSIGN_OR_RETURN(s->expr, expr_.parse_tuple(true, {}, false));
          TESSERA_RETURN_IF_ERROR(
              ts_.expect_type(TokenType::kVariableEnd, "end of print statement '}}'"));
          out.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          next();
          if (cur().type != TokenType::kName) return unexpected("a tag name");
          const std::string& tag = cur().value;
          if (std::find(end_tags.begin(), end_tags.end(), tag) != end_tags.end())
            return absl::OkStatus();
          TESSERA_ASSIGN_OR_RETURN(StmtPtr s, parse_statement(opener, opener_line, end_tags));
          out.push_back(std::move(s));
          break;
        }
        default:
          return error(tok.line, absl::StrCat("unexpected ", describe_token(tok)));
      }
    }
  }

  static std::string quoted_list(std::initializer_list<std::string_view> tags) {
    std::vector<std::string> q;
    for (auto t : tags) q.push_back(absl::StrCat("'", sv(t), "'"));
    return absl::StrJoin(q, " or ");
  }

  absl::StatusOr<StmtPtr> parse_statement(std::string_view opener, int opener_line,
                                          std::initializer_list<std::string_view> end_tags) {
    const std::string tag = cur().value;
    const int line = cur().line;
    next();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "generation") return parse_scope(line, "generation", "endgeneration");
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return error(line, absl::StrCat("'", tag, "' outside of a for loop"));
      TESSERA_RETURN_IF_ERROR(expect_block_end());
      return make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
    }
    static constexpr std::string_view kUnsupported[] = {
        "extends", "block", "include", "import", "from", "do", "autoescape", "trans", "raw"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) !=
        std::end(kUnsupported)) {
      return unsupported(line, absl::StrCat("'{% ", tag, " %}' tag"));
    }
    static constexpr std::string_view kClosers[] = {
        "elif",    "else",      "endif",   "endfor", "endset",        "endmacro",
        "endcall", "endfilter", "endwith", "endraw", "endgeneration", "endblock"};
    if (std::find(std::begin(kClosers), std::end(kClosers), tag) == std::end(kClosers)) {
      return error(line, absl::StrCat("unknown tag '", tag, "'"));
    }
    if (opener.empty())
      return error(line, absl::StrCat("unexpected tag '", tag, "': no block is open"));
    return error(
        line, absl::StrCat("unexpected tag '", tag, "': the innermost open block is '", sv(opener),
                           "' (line ", opener_line, "), expecting ", quoted_list(end_tags)));
  }

  absl::StatusOr<StmtPtr> parse_if(int line) {
    auto s = make_stmt(StmtKind::kIf, line);
    for (;;) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr cond, expr_.parse_tuple(false, {}, false));
      TESSERA_RETURN_IF_ERROR(expect_block_end());
      Body body;
      TESSERA_RETURN_IF_ERROR(parse_body(body, {"elif", "else", "endif"}, "if", line));
      s->conditions.push_back(std::move(cond));
      s->bodies.push_back(std::move(body));
      if (at_name("elif")) {
        next();
        continue;
      }
      if (at_name("else")) {
        next();
        TESSERA_RETURN_IF_ERROR(expect_block_end());
        TESSERA_RETURN_IF_ERROR(parse_body(s->else_body, {"endif"}, "if", line));
      }
      next();  // endif
      TESSERA_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
  }

  // Assignment targets: a name or a flat tuple of names, optionally parenthesized.
  absl::Status parse_targets(std::vector<std::string>& targets) {
    const bool paren = at_op("(");
    if (paren) next();
    for (;;) {
      TESSERA_ASSIGN_OR_RETURN(std::string name, expect_name());
      targets.push_back(std::move(name));
      if (!at_op(",")) break;
      next();
      if (paren && at_op(")")) break;
      if (!paren && (at_name("in") || at_op("="))) break;
    }
    if (paren) TESSERA_RETURN_IF_ERROR(expect_op(")"));
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> parse_for(int line) {
    auto s = make_stmt(StmtKind::kFor, line);
    TESSERA_RETURN_IF_ERROR(parse_targets(s->targets));
    if (!at_name("in")) return unexpected("'in'");
    next();
    TESSERA_ASSIGN_OR_RETURN(s->expr, expr_.parse_tuple(false, {"recursive"}, false));
    if (at_name("if")) {
      next();
      TESSERA_ASSIGN_OR_RETURN(s->condition, expr_.parse_expression(true));
    }
    if (at_name("recursive")) return unsupported(cur().line, "recursive for loop");
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    ++loop_depth_;
    absl::Status st = parse_body(s->body, {"endfor", "else"}, "for", line);
    --loop_depth_;
    TESSERA_RETURN_IF_ERROR(st);
    if (at_name("else")) {
      next();
      TESSERA_RETURN_IF_ERROR(expect_block_end());
      TESSERA_RETURN_IF_ERROR(parse_body(s->else_body, {"endfor"}, "for", line));
    }
    next();  // endfor
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  absl::StatusOr<StmtPtr> parse_set(int line) {
    auto s = make_stmt(StmtKind::kSet, line);
    if (cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().value == ".") {
      s->targets.push_back(cur().value);
      next();
      next();
      TESSERA_ASSIGN_OR_RETURN(s->attr, expect_name());
    } else {
      TESSERA_RETURN_IF_ERROR(parse_targets(s->targets));
    }
    if (at_op("=")) {
      next();
      TESSERA_ASSIGN_OR_RETURN(s->expr, expr_.parse_tuple(true, {}, false));
      TESSERA_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1) return unexpected("'='");
    if (at_op("|")) return unsupported(line, "filtered '{% set x | filter %}' block");
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    s->kind = StmtKind::kSetBlock;
    TESSERA_RETURN_IF_ERROR(parse_body(s->body, {"endset"}, "set", line));
    next();
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  // (a, b=default, ...) for macros and call blocks.
  absl::Status parse_signature(Stmt& s) {
    TESSERA_RETURN_IF_ERROR(expect_op("("));
    while (!at_op(")")) {
      if (!s.targets.empty()) TESSERA_RETURN_IF_ERROR(expect_op(","));
      if (at_op(")")) break;
      TESSERA_ASSIGN_OR_RETURN(std::string name, expect_name());
      ExprPtr def;
      if (at_op("=")) {
        next();
        TESSERA_ASSIGN_OR_RETURN(def, expr_.parse_expression(true));
      } else if (!s.values.empty() && s.values.back() != nullptr) {
        return error(cur().line, "non-default argument follows default argument");
      }
      s.targets.push_back(std::move(name));
      s.values.push_back(std::move(def));
    }
    next();
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> parse_macro(int line) {
    auto s = make_stmt(StmtKind::kMacro, line);
    TESSERA_ASSIGN_OR_RETURN(s->name, expect_name());
    TESSERA_RETURN_IF_ERROR(parse_signature(*s));
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    // A loop around the definition does not make break/continue legal inside the macro.
    const int saved = loop_depth_;
    loop_depth_ = 0;
    absl::Status st = parse_body(s->body, {"endmacro"}, "macro", line);
    loop_depth_ = saved;
    TESSERA_RETURN_IF_ERROR(st);
    next();
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  absl::StatusOr<StmtPtr> parse_call_block(int line) {
    auto s = make_stmt(StmtKind::kCallBlock, line);
    if (at_op("(")) TESSERA_RETURN_IF_ERROR(parse_signature(*s));
    TESSERA_ASSIGN_OR_RETURN(s->expr, expr_.parse_expression(true));
    if (s->expr->kind != ExprKind::kCall)
      return error(line, "'{% call %}' expects a call expression");
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    const int saved = loop_depth_;
    loop_depth_ = 0;
    absl::Status st = parse_body(s->body, {"endcall"}, "call", line);
    loop_depth_ = saved;
    TESSERA_RETURN_IF_ERROR(st);
    next();
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  absl::StatusOr<StmtPtr> parse_filter_block(int line) {
    auto s = make_stmt(StmtKind::kFilterBlock, line);
    TESSERA_ASSIGN_OR_RETURN(s->expr, expr_.parse_filter(nullptr, /*start_inline=*/true));
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    TESSERA_RETURN_IF_ERROR(parse_body(s->body, {"endfilter"}, "filter", line));
    next();
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  absl::StatusOr<StmtPtr> parse_with(int line) {
    auto s = make_stmt(StmtKind::kWith, line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->targets.empty()) TESSERA_RETURN_IF_ERROR(expect_op(","));
      TESSERA_ASSIGN_OR_RETURN(std::string name, expect_name());
      TESSERA_RETURN_IF_ERROR(expect_op("="));
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, expr_.parse_expression(true));
      s->targets.push_back(std::move(name));
      s->values.push_back(std::move(value));
    }
    next();
    TESSERA_RETURN_IF_ERROR(parse_body(s->body, {"endwith"}, "with", line));
    next();
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  absl::StatusOr<StmtPtr> parse_scope(int line, std::string_view tag, std::string_view end_tag) {
    auto s = make_stmt(StmtKind::kScope, line);
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    TESSERA_RETURN_IF_ERROR(parse_body(s->body, {end_tag}, tag, line));
    next();
    TESSERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  TokenStream ts_;
  ExprParser expr_;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TemplateAst>> parse_template(std::string_view source) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  return Parser(std::move(tokens)).run();
}

}  // namespace tessera::jinja
