#include "runtime/jinja/interpreter.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/jinja/builtins.h"
#include "runtime/jinja/operators.h"
#include "runtime/jinja/strings.h"

namespace tessera::jinja {
namespace {

absl::Status type_error(std::string_view message) {
  return absl::InvalidArgumentError(sv(message));
}

// Python prints a generator as "<generator object ... at 0x7f...>", an address no template can
// mean to emit; refuse rather than print something else.
absl::Status check_printable(const Value& v) {
  if (!v.is_lazy()) return absl::OkStatus();
  return absl::UnimplementedError(
      "unsupported Jinja construct: printing a generator (the result of |map, |select, |reverse, "
      "...); add |list");
}

absl::Status overflow_error() {
  return absl::InvalidArgumentError("integer overflow (values beyond 64 bits are not supported)");
}

absl::Status unpack(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(v));
  if (items.size() != targets.size()) {
    if (items.size() > targets.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("too many values to unpack (expected ", targets.size(), ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat("not enough values to unpack (expected ",
                                                   targets.size(), ", got ", items.size(), ")"));
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], std::move(items[i]));
  return absl::OkStatus();
}

}  // namespace

// --- Scope ---------------------------------------------------------------------------------------

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (const auto& [k, v] : s->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(std::string name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::move(name), std::move(value));
}

// --- iteration -----------------------------------------------------------------------------------

absl::StatusOr<std::vector<Value>> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return std::vector<Value>{};
    case Kind::kList:
      return v.is_lazy() ? v.consume() : v.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().entries.size());
      for (const auto& [k, unused] : v.as_dict().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      chars.reserve(s.size());
      for (size_t i = 0; i < s.size();) {
        size_t j = i + 1;
        while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xc0) == 0x80) ++j;
        chars.push_back(Value::string(s.substr(i, j - i)));
        i = j;
      }
      return chars;
    }
    default:
      return type_error(absl::StrCat("'", type_name(v), "' object is not iterable"));
  }
}

// --- Interpreter: rendering ----------------------------------------------------------------------

absl::StatusOr<std::string> Interpreter::render(const TemplateAst& ast, DictData context) {
  auto globals = std::make_shared<Scope>();
  globals->vars = make_globals().entries;
  auto root = std::make_shared<Scope>();
  root->parent = globals;
  root->vars = std::move(context.entries);
  std::string out;
  absl::Status st = exec_body(ast.body, root, out);
  for (const auto& weak : namespaces_) {
    if (auto ns = weak.lock()) ns->entries.clear();
  }
  if (!st.ok()) {
    if (raised_) return st;
    return absl::Status(st.code(),
                        absl::StrCat("chat template line ", error_line_, ": ", st.message()));
  }
  return out;
}

absl::Status Interpreter::raise(std::string message) {
  raised_ = true;
  return absl::InvalidArgumentError(std::move(message));
}

absl::Status Interpreter::charge_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "template exceeded the limit of ", limits_.max_loop_iterations, " loop iterations"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::check_list_size(size_t n) const {
  if (n > limits_.max_sequence_length) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "template built a sequence longer than the limit of ", limits_.max_sequence_length));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::check_string_size(size_t n) const {
  if (n > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("template output exceeds the limit of ", limits_.max_output_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::append(std::string& out, std::string_view text) const {
  TESSERA_RETURN_IF_ERROR(check_string_size(out.size() + text.size()));
  out.append(text);
  return absl::OkStatus();
}

absl::Status Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& s : body) {
    absl::Status st = exec(*s, scope, out);
    if (!st.ok()) {
      if (error_line_ == 0) error_line_ = s->line;
      return st;
    }
    if (flow_ != Flow::kNormal) return absl::OkStatus();  // break/continue unwinds to the loop
  }
  return absl::OkStatus();
}

absl::Status Interpreter::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  switch (s.kind) {
    case StmtKind::kText:
      return append(out, s.text);
    case StmtKind::kOutput: {
      TESSERA_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
      TESSERA_RETURN_IF_ERROR(check_printable(v));
      return append(out, v.str());
    }
    case StmtKind::kIf: {
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        TESSERA_ASSIGN_OR_RETURN(Value c, eval(*s.conditions[i], scope));
        if (c.truthy()) return exec_body(s.bodies[i], scope, out);
      }
      return exec_body(s.else_body, scope, out);
    }
    case StmtKind::kFor:
      return exec_for(s, scope, out);
    case StmtKind::kSet:
      return exec_set(s, scope);
    case StmtKind::kSetBlock: {
      std::string buf;
      TESSERA_RETURN_IF_ERROR(exec_body(s.body, scope, buf));
      scope->set(s.targets[0], Value::string(std::move(buf)));
      return absl::OkStatus();
    }
    case StmtKind::kMacro:
      scope->set(s.name, make_macro(s, scope, s.name));
      return absl::OkStatus();
    case StmtKind::kCallBlock:
      return exec_call_block(s, scope, out);
    case StmtKind::kFilterBlock: {
      std::string buf;
      TESSERA_RETURN_IF_ERROR(exec_body(s.body, scope, buf));
      const Value input = Value::string(std::move(buf));
      const Value* saved = filter_block_input_;
      filter_block_input_ = &input;
      absl::StatusOr<Value> v = eval(*s.expr, scope);
      filter_block_input_ = saved;
      if (!v.ok()) return v.status();
      return append(out, v->str());
    }
    case StmtKind::kWith: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (size_t i = 0; i < s.targets.size(); ++i) {
        TESSERA_ASSIGN_OR_RETURN(Value v, eval(*s.values[i], scope));
        inner->set(s.targets[i], std::move(v));
      }
      return exec_body(s.body, inner, out);
    }
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      return absl::OkStatus();
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      return absl::OkStatus();
    case StmtKind::kScope:
      return exec_body(s.body, scope, out);
  }
  return absl::InternalError("unhandled statement kind");
}

absl::Status Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  TESSERA_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr, scope));
  if (iterable.is_namespace()) return type_error("'Namespace' object is not iterable");
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(iterable));
  const auto bind = [&s](Scope& target, const Value& item) -> absl::Status {
    if (s.targets.size() == 1) {
      target.set(s.targets[0], item);
      return absl::OkStatus();
    }
    return unpack(s.targets, item, target);
  };
  if (s.condition) {  // `for x in xs if cond`: loop.* describes the filtered sequence
    TESSERA_RETURN_IF_ERROR(charge_iterations(static_cast<int64_t>(items.size())));
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      TESSERA_RETURN_IF_ERROR(bind(*probe, item));
      TESSERA_ASSIGN_OR_RETURN(Value keep, eval(*s.condition, probe));
      if (keep.truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  // Jinja runs `else` when no iteration reached the end of the body (a break or continue in
  // every iteration counts as none), not merely when the sequence was empty.
  bool completed_any = false;
  for (int64_t i = 0; i < n; ++i) {
    TESSERA_RETURN_IF_ERROR(charge_iterations(1));
    // Each iteration gets a fresh scope: a `set` in the body never survives to the next
    // iteration or past the loop (Jinja's scoping; namespace() is the escape hatch).
    auto iter_scope = std::make_shared<Scope>();
    iter_scope->parent = scope;
    TESSERA_RETURN_IF_ERROR(bind(*iter_scope, items[static_cast<size_t>(i)]));
    DictData loop;
    loop.entries.reserve(12);
    loop.entries.emplace_back("index", Value::integer(i + 1));
    loop.entries.emplace_back("index0", Value::integer(i));
    loop.entries.emplace_back("revindex", Value::integer(n - i));
    loop.entries.emplace_back("revindex0", Value::integer(n - i - 1));
    loop.entries.emplace_back("first", Value::boolean(i == 0));
    loop.entries.emplace_back("last", Value::boolean(i == n - 1));
    loop.entries.emplace_back("length", Value::integer(n));
    loop.entries.emplace_back("depth", Value::integer(1));
    loop.entries.emplace_back("depth0", Value::integer(0));
    loop.entries.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)]
                                                : Value::undefined("there is no previous item"));
    loop.entries.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                                    : Value::undefined("there is no next item"));
    loop.entries.emplace_back(
        "cycle",
        Value::callable("loop.cycle", [i](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
          if (!args.keyword.empty())
            return absl::InvalidArgumentError("loop.cycle() takes no keyword arguments");
          if (args.positional.empty())
            return absl::InvalidArgumentError("no items for cycling given");
          return args.positional[static_cast<size_t>(i) % args.positional.size()];
        }));
    iter_scope->set("loop", Value::dict(std::move(loop)));
    TESSERA_RETURN_IF_ERROR(exec_body(s.body, iter_scope, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    if (flow_ == Flow::kContinue) {
      flow_ = Flow::kNormal;
      continue;
    }
    completed_any = true;
  }
  if (!completed_any) return exec_body(s.else_body, scope, out);
  return absl::OkStatus();
}

absl::Status Interpreter::exec_set(const Stmt& s, const ScopePtr& scope) {
  TESSERA_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
  if (!s.attr.empty()) {
    const Value* ns = scope->find(s.targets[0]);
    if (ns == nullptr || !ns->is_namespace()) {
      return type_error(absl::StrCat("cannot assign attribute '", s.attr,
                                     "' on non-namespace object '", s.targets[0], "'"));
    }
    ns->mutable_namespace().set(s.attr, std::move(v));
    return absl::OkStatus();
  }
  if (s.targets.size() == 1) {
    scope->set(s.targets[0], std::move(v));
    return absl::OkStatus();
  }
  return unpack(s.targets, v, *scope);
}

absl::Status Interpreter::exec_call_block(const Stmt& s, const ScopePtr& scope, std::string& out) {
  const Expr& call_expr = *s.expr;
  TESSERA_ASSIGN_OR_RETURN(Value callee, eval(*call_expr.operands[0], scope));
  CallArgs args;
  TESSERA_RETURN_IF_ERROR(eval_args(call_expr, 1, scope, args));
  args.keyword.emplace_back("caller", make_macro(s, scope, "caller"));
  TESSERA_ASSIGN_OR_RETURN(Value result, call(callee, args));
  return append(out, result.str());
}

Value Interpreter::make_macro(const Stmt& macro, ScopePtr closure, std::string name) {
  // A weak reference: the defining scope stores the macro, so a strong one would be a cycle.
  std::weak_ptr<Scope> weak = closure;
  const Stmt* m = &macro;
  std::string fn_name = name;
  return Value::callable(std::move(name), [m, weak, fn_name](Interpreter& in, CallArgs& args) {
    return in.call_macro(*m, weak, args, fn_name);
  });
}

absl::StatusOr<Value> Interpreter::call_macro(const Stmt& macro,
                                              const std::weak_ptr<Scope>& closure, CallArgs& args,
                                              std::string_view name) {
  ScopePtr parent = closure.lock();
  if (!parent) {
    return absl::UnimplementedError(
        absl::StrCat("macro '", sv(name), "' called after the block defining it ended"));
  }
  if (call_depth_ >= limits_.max_call_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("macro calls nested deeper than the limit of ", limits_.max_call_depth));
  }
  const size_t n = macro.targets.size();
  if (args.positional.size() > n) {
    return type_error(
        absl::StrCat("macro '", sv(name), "' takes not more than ", n, " argument(s)"));
  }
  auto scope = std::make_shared<Scope>();
  scope->parent = std::move(parent);
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    scope->set(macro.targets[i], std::move(args.positional[i]));
    given[i] = true;
  }
  for (auto& [key, value] : args.keyword) {
    if (key == "caller") {
      scope->set("caller", std::move(value));
      continue;
    }
    size_t j = 0;
    while (j < n && macro.targets[j] != key) ++j;
    if (j == n)
      return type_error(
          absl::StrCat("macro '", sv(name), "' takes no keyword argument '", key, "'"));
    if (given[j])
      return type_error(
          absl::StrCat("macro '", sv(name), "' got multiple values for argument '", key, "'"));
    scope->set(key, std::move(value));
    given[j] = true;
  }
  for (size_t j = 0; j < n; ++j) {
    if (given[j]) continue;
    if (macro.values[j]) {
      TESSERA_ASSIGN_OR_RETURN(Value def, eval(*macro.values[j], scope));
      scope->set(macro.targets[j], std::move(def));
    } else {
      scope->set(macro.targets[j], Value::undefined(absl::StrCat("parameter '", macro.targets[j],
                                                                 "' was not provided")));
    }
  }
  ++call_depth_;
  std::string buf;
  absl::Status st = exec_body(macro.body, scope, buf);
  --call_depth_;
  TESSERA_RETURN_IF_ERROR(st);
  return Value::string(std::move(buf));
}

// --- Interpreter: expressions --------------------------------------------------------------------

absl::Status Interpreter::eval_args(const Expr& e, size_t first, const ScopePtr& scope,
                                    CallArgs& args) {
  for (size_t i = first; i < e.operands.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Value v, eval(*e.operands[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.keywords) {
    TESSERA_ASSIGN_OR_RETURN(Value v, eval(*expr, scope));
    args.keyword.emplace_back(key, std::move(v));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return absl::InvalidArgumentError(callee.undefined_hint());
  if (!callee.is_callable())
    return type_error(absl::StrCat("'", type_name(callee), "' object is not callable"));
  return callee.as_callable().fn(*this, args);
}

absl::StatusOr<Value> Interpreter::get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      return absl::InvalidArgumentError(obj.undefined_hint());
    case Kind::kNamespace:
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return Value::undefined(absl::StrCat("'Namespace object' has no attribute '", sv(name), "'"));
    case Kind::kDict:
      // Python getattr first: `d.items` is the method even when the dict has an 'items' key.
      if (auto m = find_method(obj, name)) return *m;
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return Value::undefined(absl::StrCat("'dict object' has no attribute '", sv(name), "'"));
    case Kind::kNone:
      return Value::undefined(absl::StrCat("'None' has no attribute '", sv(name), "'"));
    default:
      if (auto m = find_method(obj, name)) return *m;
      return Value::undefined(
          absl::StrCat("'", type_name(obj), " object' has no attribute '", sv(name), "'"));
  }
}

absl::StatusOr<Value> Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return absl::InvalidArgumentError(obj.undefined_hint());
  if (obj.is_dict() || obj.is_namespace()) {
    if (key.is_string()) {
      if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
      if (obj.is_dict()) {
        if (auto m = find_method(obj, key.as_string())) return *m;
      }
      return Value::undefined(
          absl::StrCat("'", type_name(obj), " object' has no attribute '", key.as_string(), "'"));
    }
    return Value::undefined(
        absl::StrCat("'", type_name(obj), " object' has no element ", key.repr()));
  }
  if (obj.is_lazy()) {  // generators are not subscriptable: Jinja gives undefined
    return Value::undefined(absl::StrCat("'generator object' has no element ", key.repr()));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    } else {
      const std::string& s = obj.as_string();
      if (is_ascii(s)) {
        const auto n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value::string(s.substr(static_cast<size_t>(i), 1));
      } else {
        const std::u32string cps = utf8_decode(s);
        const auto n = static_cast<int64_t>(cps.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n)
          return Value::string(utf8_encode(cps.substr(static_cast<size_t>(i), 1)));
      }
    }
    return Value::undefined(
        absl::StrCat("'", type_name(obj), " object' has no element ", key.as_int()));
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(
      absl::StrCat("'", type_name(obj), " object' has no element ", key.repr()));
}

absl::StatusOr<Value> Interpreter::eval_slice(const Expr& e, const ScopePtr& scope) {
  TESSERA_ASSIGN_OR_RETURN(Value obj, eval(*e.operands[0], scope));
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.operands[static_cast<size_t>(k) + 1]) {
      TESSERA_ASSIGN_OR_RETURN(parts[k], eval(*e.operands[static_cast<size_t>(k) + 1], scope));
    } else {
      parts[k] = Value::none();
    }
  }
  return slice_value(obj, parts[0], parts[1], parts[2]);
}

absl::StatusOr<Value> Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  absl::StatusOr<Value> result = [&]() -> absl::StatusOr<Value> {
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName:
        if (const Value* v = scope->find(e.name)) return *v;
        return Value::undefined(absl::StrCat("'", e.name, "' is undefined"));
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        items.reserve(e.operands.size());
        for (const auto& op : e.operands) {
          TESSERA_ASSIGN_OR_RETURN(Value v, eval(*op, scope));
          items.push_back(std::move(v));
        }
        return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                         : Value::tuple(std::move(items));
      }
      case ExprKind::kDict: {
        auto data = std::make_shared<DictData>();
        for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
          TESSERA_ASSIGN_OR_RETURN(Value k, eval(*e.operands[i], scope));
          if (!k.is_string()) {
            return absl::UnimplementedError(
                absl::StrCat("unsupported Jinja construct: dict key of type '", type_name(k),
                             "' (only str keys)"));
          }
          TESSERA_ASSIGN_OR_RETURN(Value v, eval(*e.operands[i + 1], scope));
          data->set(k.as_string(), std::move(v));
        }
        return Value::dict(std::move(data));
      }
      case ExprKind::kGetAttr: {
        TESSERA_ASSIGN_OR_RETURN(Value obj, eval(*e.operands[0], scope));
        return get_attr(obj, e.name);
      }
      case ExprKind::kGetItem: {
        TESSERA_ASSIGN_OR_RETURN(Value obj, eval(*e.operands[0], scope));
        TESSERA_ASSIGN_OR_RETURN(Value key, eval(*e.operands[1], scope));
        return get_item(obj, key);
      }
      case ExprKind::kSlice:
        return eval_slice(e, scope);
      case ExprKind::kCall: {
        TESSERA_ASSIGN_OR_RETURN(Value callee, eval(*e.operands[0], scope));
        CallArgs args;
        TESSERA_RETURN_IF_ERROR(eval_args(e, 1, scope, args));
        return call(callee, args);
      }
      case ExprKind::kFilter: {
        Value input;
        if (e.operands[0]) {
          TESSERA_ASSIGN_OR_RETURN(input, eval(*e.operands[0], scope));
        } else if (filter_block_input_ != nullptr) {
          input = *filter_block_input_;
        }
        CallArgs args;
        TESSERA_RETURN_IF_ERROR(eval_args(e, 1, scope, args));
        return apply_filter(*this, e.name, input, args);
      }
      case ExprKind::kTest: {
        TESSERA_ASSIGN_OR_RETURN(Value subject, eval(*e.operands[0], scope));
        CallArgs args;
        TESSERA_RETURN_IF_ERROR(eval_args(e, 1, scope, args));
        TESSERA_ASSIGN_OR_RETURN(bool r, apply_test(*this, e.name, subject, args));
        return Value::boolean(r != e.negated);
      }
      case ExprKind::kNeg:
      case ExprKind::kPos: {
        TESSERA_ASSIGN_OR_RETURN(Value v, eval(*e.operands[0], scope));
        if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
        const char* op = e.kind == ExprKind::kNeg ? "-" : "+";
        if (!v.is_number())
          return type_error(
              absl::StrCat("bad operand type for unary ", op, ": '", type_name(v), "'"));
        if (e.kind == ExprKind::kPos) return v.is_bool() ? Value::integer(v.as_int()) : v;
        if (v.is_float()) return Value::number(-v.as_double());
        if (v.as_int() == std::numeric_limits<int64_t>::min()) return overflow_error();
        return Value::integer(-v.as_int());
      }
      case ExprKind::kNot: {
        TESSERA_ASSIGN_OR_RETURN(Value v, eval(*e.operands[0], scope));
        return Value::boolean(!v.truthy());
      }
      case ExprKind::kBinary: {
        TESSERA_ASSIGN_OR_RETURN(Value a, eval(*e.operands[0], scope));
        TESSERA_ASSIGN_OR_RETURN(Value b, eval(*e.operands[1], scope));
        return binary_operator(*this, e.name, a, b);
      }
      case ExprKind::kConcat: {
        std::string out;
        for (const auto& op : e.operands) {
          TESSERA_ASSIGN_OR_RETURN(Value v, eval(*op, scope));
          TESSERA_RETURN_IF_ERROR(check_printable(v));
          out += v.str();
          TESSERA_RETURN_IF_ERROR(check_string_size(out.size()));
        }
        return Value::string(std::move(out));
      }
      case ExprKind::kCompare: {
        TESSERA_ASSIGN_OR_RETURN(Value left, eval(*e.operands[0], scope));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          TESSERA_ASSIGN_OR_RETURN(Value right, eval(*e.operands[i + 1], scope));
          const std::string& op = e.ops[i];
          bool r = false;
          if (op == "==" || op == "!=") {
            r = values_equal(left, right) == (op == "==");
          } else if (op == "in" || op == "notin") {
            TESSERA_ASSIGN_OR_RETURN(bool in, contains(right, left));
            r = in == (op == "in");
          } else {
            if (left.is_undefined()) return absl::InvalidArgumentError(left.undefined_hint());
            if (right.is_undefined()) return absl::InvalidArgumentError(right.undefined_hint());
            absl::StatusOr<int> c = compare_values(left, right);
            if (!c.ok()) {
              return type_error(absl::StrCat("'", op, "' not supported between instances of '",
                                             type_name(left), "' and '", type_name(right), "'"));
            }
            r = op == "<" ? *c < 0 : op == "<=" ? *c <= 0 : op == ">" ? *c > 0 : *c >= 0;
          }
          if (!r) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case ExprKind::kAnd: {
        TESSERA_ASSIGN_OR_RETURN(Value a, eval(*e.operands[0], scope));
        if (!a.truthy()) return a;
        return eval(*e.operands[1], scope);
      }
      case ExprKind::kOr: {
        TESSERA_ASSIGN_OR_RETURN(Value a, eval(*e.operands[0], scope));
        if (a.truthy()) return a;
        return eval(*e.operands[1], scope);
      }
      case ExprKind::kCondition: {
        TESSERA_ASSIGN_OR_RETURN(Value c, eval(*e.operands[1], scope));
        if (c.truthy()) return eval(*e.operands[0], scope);
        if (e.operands[2]) return eval(*e.operands[2], scope);
        return Value::undefined("the inline if-expression had no else branch");
      }
    }
    return absl::InternalError("unhandled expression kind");
  }();
  if (!result.ok() && error_line_ == 0) error_line_ = e.line;
  return result;
}

}  // namespace tessera::jinja
