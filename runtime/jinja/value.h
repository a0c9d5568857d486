// The value type of the chat-template Jinja interpreter, with Python's semantics for the parts
// templates rely on: str()/repr() formatting, truthiness, equality and ordering, and json.dumps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace tessera::jinja {

class Interpreter;
class Value;

enum class Kind : uint8_t {
  kUndefined,  // a missing name/attribute; falsy, renders empty, most operations are errors
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,       // also tuples (ListData::is_tuple): the sandbox makes both immutable
  kDict,       // insertion-ordered, string keys
  kNamespace,  // namespace(): the only mutable object (`set ns.x = ...`)
  kCallable,
};

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
  // A Python generator/iterator (what |map, |select, |reverse... return): always truthy, no
  // len(), not subscriptable, and single-use: iterating it once leaves it empty. Values are
  // per render (one thread), so the mutable flag is not shared across threads.
  bool lazy = false;
  mutable bool consumed = false;
};

// Insertion-ordered map. Linear lookup: template dicts (messages, tool schemas) are small, and
// keeping order is what makes tojson match Python's output.
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces in place or appends
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)>;

struct Callable {
  std::string name;
  NativeFunction fn;
};

class Value {
 public:
  Value() = default;  // undefined without a hint

  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  // A markupsafe.Markup string (from |safe or |escape): `+` and `%` with it HTML-escape the
  // plain-string operands, as Python does. Macro output is a plain str: autoescape is off.
  static Value markup(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value generator(std::vector<Value> items);
  static Value dict(std::shared_ptr<DictData> data);
  static Value dict(DictData data);
  static Value make_namespace(std::shared_ptr<DictData> data);
  static Value callable(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers: bool is an int subclass.
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && list_data().is_tuple; }
  bool is_lazy() const { return kind_ == Kind::kList && list_data().lazy; }
  // Iterates a generator: its remaining items, after which it is exhausted.
  std::vector<Value> consume() const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // bool or int
  double as_double() const;  // bool, int or float
  const std::string& as_string() const { return *std::get<StringPtr>(data_); }
  const std::vector<Value>& items() const { return list_data().items; }
  const DictData& as_dict() const { return *std::get<DictPtr>(data_); }  // dict or namespace
  // Namespaces are shared by reference: `set ns.x` through any copy is seen by all of them.
  DictData& mutable_namespace() const { return *std::get<DictPtr>(data_); }
  const Callable& as_callable() const { return *std::get<CallablePtr>(data_); }
  // Why an undefined value is undefined, e.g. "'foo' is undefined"; used for error messages.
  std::string undefined_hint() const;
  // Identity of shared containers, for the `sameas` test.
  const void* identity() const;

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr()

 private:
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<DictData>;
  using CallablePtr = std::shared_ptr<const Callable>;

  const ListData& list_data() const { return *std::get<ListPtr>(data_); }
  void append_repr(std::string& out, int depth) const;

  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  std::variant<std::monostate, bool, int64_t, double, StringPtr, ListPtr, DictPtr, CallablePtr>
      data_;
};

// Python's type() names, for error messages ("'<' not supported between 'int' and 'str'").
const char* type_name(const Value& v);

// This abseil build has its own absl::string_view, which absl::StrCat takes and std::string_view
// does not convert to.
inline absl::string_view sv(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Python ==: numbers compare numerically (True == 1), containers element-wise; never an error.
bool values_equal(const Value& a, const Value& b);
// Python <, as -1/0/1; a TypeError (as InvalidArgument) for unorderable operands.
absl::StatusOr<int> compare_values(const Value& a, const Value& b);
// Python `needle in haystack`.
absl::StatusOr<bool> contains(const Value& haystack, const Value& needle);

// Python float repr(): shortest round-trip digits, exponent form outside [1e-4, 1e16).
std::string python_float_repr(double d);
// Python repr() of a str.
std::string python_string_repr(std::string_view s);

// JSON <-> Value. Objects keep their key order. Depth is bounded so hostile input cannot exhaust
// the stack.
absl::StatusOr<Value> value_from_json(const nlohmann::json& j);
absl::StatusOr<Value> value_from_json(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // json.dumps(indent=...), already resolved to a string
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Python json.dumps(value, ...), the way transformers' tojson override calls it.
absl::StatusOr<std::string> dump_json(const Value& v, const JsonDumpOptions& options);

}  // namespace tessera::jinja
