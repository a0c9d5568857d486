// AST and recursive-descent parser for the chat-template Jinja subset. The grammar (operator
// precedence, where filters and tests bind, what `if` means inside `for`) follows
// jinja2/parser.py so that expressions group exactly as they do in transformers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/jinja/value.h"

namespace tessera::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  kLiteral,    // literal
  kName,       // name
  kList,       // operands
  kTuple,      // operands
  kDict,       // operands: key0, value0, key1, value1, ...
  kGetAttr,    // operands[0].name
  kGetItem,    // operands[0][operands[1]]
  kSlice,      // operands[0][operands[1]:operands[2]:operands[3]] (null = omitted)
  kCall,       // operands[0](operands[1..], keywords)
  kFilter,     // operands[0] | name(operands[1..], keywords); operands[0] null in {% filter %}
  kTest,       // operands[0] is [not] name(operands[1..], keywords)
  kNeg,        // -operands[0]
  kPos,        // +operands[0]
  kNot,        // not operands[0]
  kBinary,     // operands[0] name operands[1], name in + - * / // % **
  kConcat,     // operands joined with ~
  kCompare,    // operands[0] ops[0] operands[1] ops[1] ... (chained, like Python)
  kAnd,        // operands[0] and operands[1]
  kOr,         // operands[0] or operands[1]
  kCondition,  // operands[0] if operands[1] else operands[2] (null = undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
  bool negated = false;          // kTest: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // conditions[i] -> bodies[i]; else_body
  kFor,          // for targets in expr [if condition]: body [else else_body]
  kSet,          // set targets = expr, or set targets[0].attr = expr (namespace)
  kSetBlock,     // set targets[0] %}body{% endset
  kMacro,        // macro name(targets = defaults): body
  kCallBlock,    // call(targets) expr: body — body becomes `caller`
  kFilterBlock,  // filter expr (a kFilter chain with a null innermost input): body
  kWith,         // with targets = values: body
  kBreak,
  kContinue,
  kScope,  // a block rendered in place: {% generation %} from transformers
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::string attr;                 // kSet: namespace attribute target
  std::string name;                 // kMacro
  std::vector<ExprPtr> values;      // kMacro defaults (null = required), kWith values
  std::vector<ExprPtr> conditions;  // kIf
  std::vector<Body> bodies;         // kIf
  Body body;
  Body else_body;
};

struct TemplateAst {
  Body body;
};

// Parses a template. Syntax errors and constructs outside the supported subset are errors naming
// the construct and its line: unknown filters and tests are rejected here, like Jinja does at
// compile time, so that a template is checked once at load.
absl::StatusOr<std::unique_ptr<TemplateAst>> parse_template(std::string_view source);

}  // namespace tessera::jinja
