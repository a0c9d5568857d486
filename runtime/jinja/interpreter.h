// Tree-walking evaluator for the chat-template Jinja subset. One Interpreter renders once; the
// AST it walks is immutable, so a parsed template may be rendered from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/jinja/parser.h"
#include "runtime/jinja/value.h"

namespace tessera::jinja {

// Bounds on one render. A chat template is code shipped inside a model file; these turn a
// runaway one into a RESOURCE_EXHAUSTED error instead of a hung or OOM-killed server.
struct RenderLimits {
  size_t max_output_bytes = size_t{32} << 20;  // per rendered buffer (template, macro, set block)
  int64_t max_loop_iterations = 1'000'000;     // summed over every loop of the render
  int max_call_depth = 48;                     // nested macro / caller() calls
  size_t max_sequence_length = 1'000'000;      // elements of a list built by range(), + or *
};

// Variable scope, chained to its parent. Heap-allocated so that a macro can keep a (weak)
// reference to the scope it was defined in; a strong one would be a cycle, since that scope holds
// the macro.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;
  void set(std::string name, Value value);  // always in this scope, shadowing outer ones
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits = {}) : limits_(limits) {}

  // Renders `ast` with `context` as the template's variables (on top of the globals). Errors
  // carry the template line; raise_exception() errors carry exactly the template's message.
  absl::StatusOr<std::string> render(const TemplateAst& ast, DictData context);

  // --- used by builtins ---
  // Calls a callable value (macro, builtin, bound method).
  absl::StatusOr<Value> call(const Value& callee, CallArgs& args);
  // Jinja's getattr (attribute, then item) and getitem (item, then attribute).
  absl::StatusOr<Value> get_attr(const Value& obj, std::string_view name);
  absl::StatusOr<Value> get_item(const Value& obj, const Value& key);
  // Accounts `n` loop iterations (or element visits) against the render's budget.
  absl::Status charge_iterations(int64_t n);
  // Errors if a list of `n` elements / a string of `n` bytes would exceed the limits.
  absl::Status check_list_size(size_t n) const;
  absl::Status check_string_size(size_t n) const;
  // namespace() objects are the only mutable values and could be made to contain themselves;
  // they are emptied when the render ends so that such cycles do not leak.
  void track_namespace(const std::shared_ptr<DictData>& ns) { namespaces_.push_back(ns); }
  const RenderLimits& limits() const { return limits_; }
  // raise_exception(): the error keeps the template's text verbatim.
  absl::Status raise(std::string message);

 private:
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  absl::Status exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  absl::Status exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  absl::Status exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  absl::Status exec_set(const Stmt& s, const ScopePtr& scope);
  absl::Status exec_call_block(const Stmt& s, const ScopePtr& scope, std::string& out);
  absl::Status append(std::string& out, std::string_view text) const;

  absl::StatusOr<Value> eval(const Expr& e, const ScopePtr& scope);
  absl::StatusOr<Value> eval_slice(const Expr& e, const ScopePtr& scope);
  absl::Status eval_args(const Expr& e, size_t first, const ScopePtr& scope, CallArgs& args);

  // Invokes a macro (or a call block's body as `caller`): fresh scope over `closure`.
  absl::StatusOr<Value> call_macro(const Stmt& macro, const std::weak_ptr<Scope>& closure,
                                   CallArgs& args, std::string_view name);
  Value make_macro(const Stmt& macro, ScopePtr closure, std::string name);

  RenderLimits limits_;
  Flow flow_ = Flow::kNormal;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int error_line_ = 0;  // line of the innermost construct that failed
  std::vector<std::weak_ptr<DictData>> namespaces_;
  bool raised_ = false;  // the pending error came from raise_exception()
  const Value* filter_block_input_ = nullptr;
};

// Python-style iteration: list items, dict keys, string code points; undefined iterates empty.
absl::StatusOr<std::vector<Value>> iterate(const Value& v);

}  // namespace tessera::jinja
