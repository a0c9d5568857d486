// The expression half of the template parser (jinja2/parser.py from parse_expression down) and
// the token cursor it shares with the statement parser in parser.cc. Internal.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/jinja/lexer.h"
#include "runtime/jinja/parser.h"

namespace tessera::jinja {

// How a token is named in error messages ("end of statement block '%}'").
std::string describe_token(const Token& t);

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool at_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().value == op;
  }
  bool at_name(std::string_view name) const {
    return cur().type == TokenType::kName && cur().value == name;
  }

  absl::Status error(int line, std::string_view message) const;
  absl::Status unsupported(int line, std::string_view what) const;
  absl::Status unexpected(std::string_view expected) const;  // "expected X, got <current>"
  absl::Status expect_op(std::string_view op);
  absl::Status expect_type(TokenType type, std::string_view what);
  absl::StatusOr<std::string> expect_name();

  // Recursive descent: nesting (blocks and expressions together) is bounded so that a hostile
  // template cannot overflow the stack. RAII: counts one level while alive.
  class DepthGuard {
   public:
    explicit DepthGuard(TokenStream& ts) : depth_(ts.depth_) { ++depth_; }
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    bool exceeded() const { return depth_ > kMaxDepth; }

   private:
    static constexpr int kMaxDepth = 200;
    int& depth_;
  };

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

class ExprParser {
 public:
  explicit ExprParser(TokenStream& ts) : ts_(ts) {}

  // An expression, with the inline `x if c else y` when `with_condexpr`.
  absl::StatusOr<ExprPtr> parse_expression(bool with_condexpr);
  // Comma-separated expressions become a tuple; `extra_end` names stop it (`recursive`).
  absl::StatusOr<ExprPtr> parse_tuple(bool with_condexpr,
                                      std::initializer_list<std::string_view> extra_end,
                                      bool explicit_parens);
  // `|f(args)|g` applied to `node`; `start_inline` when the first `|` is implied
  // (`{% filter f %}`).
  absl::StatusOr<ExprPtr> parse_filter(ExprPtr node, bool start_inline);

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

  bool at_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  absl::StatusOr<ExprPtr> binary(ExprKind kind, std::string op, ExprPtr left, ExprPtr right,
                                 int line);
  absl::StatusOr<ExprPtr> parse_or();
  absl::StatusOr<ExprPtr> parse_and();
  absl::StatusOr<ExprPtr> parse_not();
  absl::StatusOr<ExprPtr> parse_compare();
  absl::StatusOr<ExprPtr> parse_math1();
  absl::StatusOr<ExprPtr> parse_concat();
  absl::StatusOr<ExprPtr> parse_math2();
  absl::StatusOr<ExprPtr> parse_pow();
  absl::StatusOr<ExprPtr> parse_unary(bool with_filter);
  absl::StatusOr<ExprPtr> parse_primary();
  absl::StatusOr<ExprPtr> parse_postfix(ExprPtr node);
  absl::StatusOr<ExprPtr> parse_filter_expr(ExprPtr node);
  absl::StatusOr<ExprPtr> parse_subscript(ExprPtr node);
  bool at_slice_part_end() const { return at_op("]") || at_op(","); }
  absl::StatusOr<ExprPtr> parse_subscribed();
  absl::Status parse_call_args(Expr& e);
  absl::StatusOr<ExprPtr> parse_call(ExprPtr callee);
  absl::StatusOr<std::string> parse_dotted_name();
  absl::StatusOr<ExprPtr> parse_test(ExprPtr node);

  TokenStream& ts_;
};

}  // namespace tessera::jinja
