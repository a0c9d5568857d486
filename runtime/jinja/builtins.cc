// Tests, methods, globals, argument binding and %-formatting. The filters live in
// filters.cc.
#include "runtime/jinja/builtins.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "runtime/jinja/interpreter.h"
#include "runtime/jinja/strings.h"

namespace tessera::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE: transformers' sandbox refuses larger range() calls too.
constexpr int64_t kMaxRange = 100000;

absl::Status arg_error(std::string_view fn, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(sv(fn), "(): ", sv(message)));
}

absl::StatusOr<std::optional<std::string>> optional_string(std::string_view fn,
                                                           const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string())
    return arg_error(fn, absl::StrCat("expected a str argument, got ", type_name(*v)));
  return std::optional<std::string>(v->as_string());
}

absl::StatusOr<int64_t> int_arg(std::string_view fn, const std::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool())
    return arg_error(fn, absl::StrCat("expected an int argument, got ", type_name(*v)));
  return v->as_int();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

// --- tests ---------------------------------------------------------------------------------------

using TestFn = absl::StatusOr<bool> (*)(Interpreter&, const Value&, CallArgs&);

absl::StatusOr<Value> one_arg(std::string_view test, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(test, args, {"other"}, 1));
  return std::move(*a[0]);
}

absl::StatusOr<bool> no_args(std::string_view test, CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty())
    return arg_error(test, "takes no arguments");
  return true;
}

absl::StatusOr<bool> compare_test(std::string_view test, const Value& v, CallArgs& args,
                                  bool (*pred)(int)) {
  TESSERA_ASSIGN_OR_RETURN(Value other, one_arg(test, args));
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  TESSERA_ASSIGN_OR_RETURN(int c, compare_values(v, other));
  return pred(c);
}

absl::StatusOr<bool> modulo_test(std::string_view test, const Value& v, int64_t divisor,
                                 int64_t want) {
  if (!v.is_number())
    return absl::InvalidArgumentError(
        absl::StrCat("test '", sv(test), "' needs a number, got ", type_name(v)));
  if (divisor == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
  if (v.is_float()) {
    double m = std::fmod(v.as_double(), static_cast<double>(divisor));
    if (m != 0 && ((m < 0) != (divisor < 0))) m += static_cast<double>(divisor);
    return m == static_cast<double>(want);
  }
  int64_t m = v.as_int() % divisor;
  if (m != 0 && ((m < 0) != (divisor < 0))) m += divisor;
  return m == want;
}

absl::StatusOr<bool> test_lt(Interpreter&, const Value& v, CallArgs& args) {
  return compare_test("lt", v, args, [](int c) { return c < 0; });
}
absl::StatusOr<bool> test_le(Interpreter&, const Value& v, CallArgs& args) {
  return compare_test("le", v, args, [](int c) { return c <= 0; });
}
absl::StatusOr<bool> test_gt(Interpreter&, const Value& v, CallArgs& args) {
  return compare_test("gt", v, args, [](int c) { return c > 0; });
}
absl::StatusOr<bool> test_ge(Interpreter&, const Value& v, CallArgs& args) {
  return compare_test("ge", v, args, [](int c) { return c >= 0; });
}

#define TESSERA_JINJA_SIMPLE_TEST(expr)                                      \
  [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> { \
    TESSERA_RETURN_IF_ERROR(no_args("test", args).status());                 \
    return (expr);                                                           \
  }

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

const TestEntry kTests[] = {
    {"defined", TESSERA_JINJA_SIMPLE_TEST(!v.is_undefined())},
    {"undefined", TESSERA_JINJA_SIMPLE_TEST(v.is_undefined())},
    {"none", TESSERA_JINJA_SIMPLE_TEST(v.is_none())},
    {"boolean", TESSERA_JINJA_SIMPLE_TEST(v.is_bool())},
    {"true", TESSERA_JINJA_SIMPLE_TEST(v.is_bool() && v.as_bool())},
    {"false", TESSERA_JINJA_SIMPLE_TEST(v.is_bool() && !v.as_bool())},
    {"integer", TESSERA_JINJA_SIMPLE_TEST(v.is_int())},
    {"float", TESSERA_JINJA_SIMPLE_TEST(v.is_float())},
    {"number", TESSERA_JINJA_SIMPLE_TEST(v.is_number())},
    {"string", TESSERA_JINJA_SIMPLE_TEST(v.is_string())},
    {"mapping", TESSERA_JINJA_SIMPLE_TEST(v.is_dict())},
    // Jinja's Undefined implements __iter__, __len__ and __call__, so it passes these three.
    {"iterable",
     TESSERA_JINJA_SIMPLE_TEST(v.is_undefined() || v.is_list() || v.is_dict() || v.is_string())},
    {"sequence", TESSERA_JINJA_SIMPLE_TEST(v.is_undefined() || (v.is_list() && !v.is_lazy()) ||
                                           v.is_dict() || v.is_string())},
    {"callable", TESSERA_JINJA_SIMPLE_TEST(v.is_undefined() || v.is_callable())},
    {"lower", TESSERA_JINJA_SIMPLE_TEST(pystr::is_lower(v.str()))},
    {"upper", TESSERA_JINJA_SIMPLE_TEST(pystr::is_upper(v.str()))},
    {"escaped", TESSERA_JINJA_SIMPLE_TEST(v.is_markup())},
    {"odd",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_RETURN_IF_ERROR(no_args("odd", args).status());
       return modulo_test("odd", v, 2, 1);
     }},
    {"even",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_RETURN_IF_ERROR(no_args("even", args).status());
       return modulo_test("even", v, 2, 0);
     }},
    {"divisibleby",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("divisibleby", args, {"num"}, 1));
       if (!a[0]->is_int() && !a[0]->is_bool()) return arg_error("divisibleby", "expected an int");
       return modulo_test("divisibleby", v, a[0]->as_int(), 0);
     }},
    {"sameas",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_ASSIGN_OR_RETURN(Value other, one_arg("sameas", args));
       if (v.kind() != other.kind()) return false;
       if (v.identity() != nullptr) return v.identity() == other.identity();
       return values_equal(v, other);
     }},
    {"eq",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_ASSIGN_OR_RETURN(Value other, one_arg("eq", args));
       return values_equal(v, other);
     }},
    {"ne",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_ASSIGN_OR_RETURN(Value other, one_arg("ne", args));
       return !values_equal(v, other);
     }},
    {"lt", test_lt},
    {"le", test_le},
    {"gt", test_gt},
    {"ge", test_ge},
    {"in",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_ASSIGN_OR_RETURN(Value seq, one_arg("in", args));
       return contains(seq, v);
     }},
    {"filter",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_RETURN_IF_ERROR(no_args("filter", args).status());
       return v.is_string() && filter_support(v.as_string()) != Support::kUnknown;
     }},
    {"test",
     [](Interpreter&, const Value& v, CallArgs& args) -> absl::StatusOr<bool> {
       TESSERA_RETURN_IF_ERROR(no_args("test", args).status());
       return v.is_string() && test_support(v.as_string()) != Support::kUnknown;
     }},
};

#undef TESSERA_JINJA_SIMPLE_TEST

std::string_view canonical_test(std::string_view name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "lessthan" || name == "<") return "lt";
  if (name == "<=") return "le";
  if (name == "greaterthan" || name == ">") return "gt";
  if (name == ">=") return "ge";
  return name;
}

const TestEntry* find_test(std::string_view name) {
  name = canonical_test(name);
  for (const TestEntry& t : kTests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// --- methods -------------------------------------------------------------------------------------

// str.format with automatic/positional/keyword fields and no format specs.
absl::StatusOr<std::string> str_format(const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return absl::InvalidArgumentError("str.format(): single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      return absl::InvalidArgumentError("str.format(): single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    if (field.find_first_of(":![.") != std::string::npos) {
      return absl::UnimplementedError(
          absl::StrCat("unsupported Jinja construct: str.format() field '{", field, "}'"));
    }
    const Value* v = nullptr;
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = field.empty() ? auto_index++ : static_cast<size_t>(std::stoul(field));
      if (idx >= args.positional.size())
        return absl::InvalidArgumentError("str.format(): replacement index out of range");
      v = &args.positional[idx];
    } else {
      for (const auto& [k, val] : args.keyword) {
        if (k == field) v = &val;
      }
      if (v == nullptr)
        return absl::InvalidArgumentError(absl::StrCat("str.format(): missing key '", field, "'"));
    }
    out += v->str();
  }
  return out;
}

absl::StatusOr<bool> affix_match(const std::string& s, CallArgs& args, bool suffix) {
  const char* fn = suffix ? "endswith" : "startswith";
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"prefix", "start", "end"}, 1));
  std::string text = s;
  if ((a[1] && !a[1]->is_none()) || (a[2] && !a[2]->is_none())) {
    const std::u32string cps = utf8_decode(s);
    const auto n = static_cast<int64_t>(cps.size());
    const auto clamp = [n](int64_t x) {
      return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n);
    };
    TESSERA_ASSIGN_OR_RETURN(int64_t start, int_arg(fn, a[1], 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t end, int_arg(fn, a[2], n));
    start = clamp(start);
    end = clamp(end);
    text = start < end ? utf8_encode(std::u32string_view(cps).substr(
                             static_cast<size_t>(start), static_cast<size_t>(end - start)))
                       : std::string();
  }
  const auto match = [&](const Value& v) -> absl::StatusOr<bool> {
    if (!v.is_string()) return arg_error(fn, "first arg must be str or a tuple of str");
    const std::string& p = v.as_string();
    if (p.size() > text.size()) return false;
    return suffix ? text.compare(text.size() - p.size(), p.size(), p) == 0
                  : text.compare(0, p.size(), p) == 0;
  };
  if (a[0]->is_list()) {
    for (const Value& p : a[0]->items()) {
      TESSERA_ASSIGN_OR_RETURN(bool m, match(p));
      if (m) return true;
    }
    return false;
  }
  return match(*a[0]);
}

absl::StatusOr<Value> string_method(Interpreter& in, const std::string& s, std::string_view name,
                                    CallArgs& args) {
  const std::string fn = absl::StrCat("str.", sv(name));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"chars"}));
    TESSERA_ASSIGN_OR_RETURN(auto chars, optional_string(fn, a[0]));
    return Value::string(pystr::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"sep", "maxsplit"}));
    TESSERA_ASSIGN_OR_RETURN(auto sep, optional_string(fn, a[0]));
    TESSERA_ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(fn, a[1], -1));
    if (sep && sep->empty()) return arg_error(fn, "empty separator");
    return string_list(name == "split" ? pystr::split(s, sep, maxsplit)
                                       : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"keepends"}));
    return string_list(pystr::splitlines(s, a[0] && a[0]->truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    TESSERA_ASSIGN_OR_RETURN(bool m, affix_match(s, args, name == "endswith"));
    return Value::boolean(m);
  }
  if (name == "replace") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"old", "new", "count"}, 2));
    if (!a[0]->is_string() || !a[1]->is_string()) return arg_error(fn, "arguments must be str");
    TESSERA_ASSIGN_OR_RETURN(int64_t count, int_arg(fn, a[2], -1));
    std::optional<std::string> out = pystr::replace(s, a[0]->as_string(), a[1]->as_string(),
                                                    count, in.limits().max_output_bytes);
    if (!out) return in.check_string_size(SIZE_MAX);  // the limit's error
    return Value::string(*std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"sub"}, 1));
    if (!a[0]->is_string()) return arg_error(fn, "must be str");
    if (name == "count") return Value::integer(pystr::count(s, a[0]->as_string()));
    const int64_t pos = pystr::find(s, a[0]->as_string(), name[0] == 'r');
    if (pos < 0 && (name == "index" || name == "rindex"))
      return arg_error(fn, "substring not found");
    return Value::integer(pos);
  }
  if (name == "join") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"iterable"}, 1));
    TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(*a[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return arg_error(fn, absl::StrCat("sequence item ", i, ": expected str instance, ",
                                          type_name(items[i]), " found"));
      }
      if (i > 0) out += s;
      out += items[i].as_string();
    }
    return Value::string(std::move(out));
  }
  if (name == "format") {
    TESSERA_ASSIGN_OR_RETURN(std::string out, str_format(s, args));
    return Value::string(std::move(out));
  }
  // The rest take no arguments.
  if (!args.positional.empty() || !args.keyword.empty()) return arg_error(fn, "takes no arguments");
  if (name == "upper") return Value::string(pystr::upper(s));
  if (name == "lower") return Value::string(pystr::lower(s));
  if (name == "title") return Value::string(pystr::title(s));
  if (name == "capitalize") return Value::string(pystr::capitalize(s));
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
    return Value::boolean(pystr::all_digits(s));
  if (name == "isalpha") return Value::boolean(pystr::all_alpha(s));
  if (name == "isalnum") return Value::boolean(pystr::all_alnum(s));
  if (name == "isspace") return Value::boolean(pystr::all_space(s));
  if (name == "islower") return Value::boolean(pystr::is_lower(s));
  if (name == "isupper") return Value::boolean(pystr::is_upper(s));
  return absl::InternalError(absl::StrCat("unhandled method ", fn));
}

constexpr std::string_view kStringMethods[] = {
    "strip",     "lstrip",    "rstrip",  "split",   "rsplit",  "splitlines", "startswith",
    "endswith",  "replace",   "find",    "rfind",   "index",   "rindex",     "count",
    "join",      "format",    "upper",   "lower",   "title",   "capitalize", "isdigit",
    "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "islower",    "isupper"};

// Methods that exist in Python but that ImmutableSandboxedEnvironment refuses to call.
constexpr std::string_view kMutatingMethods[] = {"append",  "extend",     "insert", "pop",
                                                 "remove",  "reverse",    "sort",   "clear",
                                                 "popitem", "setdefault", "update"};

bool in_list(std::string_view name, const std::string_view* begin, const std::string_view* end) {
  return std::find(begin, end, name) != end;
}

absl::StatusOr<Value> dict_method(const Value& d, std::string_view name, CallArgs& args) {
  const std::string fn = absl::StrCat("dict.", sv(name));
  if (name == "get") {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"key", "default"}, 1));
    if (a[0]->is_string()) {
      if (const Value* v = d.as_dict().find(a[0]->as_string())) return *v;
    }
    return a[1] ? *a[1] : Value::none();
  }
  if (!args.positional.empty() || !args.keyword.empty()) return arg_error(fn, "takes no arguments");
  std::vector<Value> out;
  for (const auto& [k, v] : d.as_dict().entries) {
    if (name == "keys") {
      out.push_back(Value::string(k));
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::tuple({Value::string(k), v}));
    }
  }
  return Value::list(std::move(out));
}

absl::StatusOr<Value> list_method(const Value& l, std::string_view name, CallArgs& args) {
  const std::string fn = absl::StrCat(l.is_tuple() ? "tuple." : "list.", sv(name));
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"value"}, 1));
  int64_t count = 0;
  for (size_t i = 0; i < l.items().size(); ++i) {
    if (!values_equal(l.items()[i], *a[0])) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return arg_error(fn, "value is not in list");
  return Value::integer(count);
}

// --- globals -------------------------------------------------------------------------------------

absl::StatusOr<Value> global_range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) return arg_error("range", "takes no keyword arguments");
  std::vector<int64_t> v;
  for (const Value& a : args.positional) {
    if (!a.is_int() && !a.is_bool())
      return arg_error(
          "range", absl::StrCat("'", type_name(a), "' object cannot be interpreted as an integer"));
    v.push_back(a.as_int());
  }
  if (v.empty() || v.size() > 3) return arg_error("range", "expected 1 to 3 arguments");
  const int64_t start = v.size() == 1 ? 0 : v[0];
  const int64_t stop = v.size() == 1 ? v[0] : v[1];
  const int64_t step = v.size() == 3 ? v[2] : 1;
  if (step == 0) return arg_error("range", "arg 3 must not be zero");
  // In 128 bits: stop - start and -step overflow int64 for far-apart bounds or step = INT64_MIN.
  using Wide = __int128;
  Wide n = 0;
  if (step > 0 && start < stop) n = (Wide{stop} - start - 1) / step + 1;
  if (step < 0 && start > stop) n = (Wide{start} - stop - 1) / -Wide{step} + 1;
  if (n > kMaxRange) {
    return absl::ResourceExhaustedError(
        absl::StrCat("range(): range too big; the sandbox blocks ranges larger than ", kMaxRange));
  }
  TESSERA_RETURN_IF_ERROR(in.check_list_size(static_cast<size_t>(n)));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
    items.push_back(Value::integer(static_cast<int64_t>(start + Wide{i} * step)));  // in range
  }
  return Value::list(std::move(items));
}

// dict(...)/namespace(...) arguments: an optional mapping or list of pairs, then keywords.
absl::StatusOr<std::shared_ptr<DictData>> build_mapping(std::string_view fn, CallArgs& args) {
  auto data = std::make_shared<DictData>();
  if (args.positional.size() > 1) return arg_error(fn, "expected at most 1 positional argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict() || src.is_namespace()) {
      data->entries = src.as_dict().entries;
    } else if (src.is_list()) {
      for (const Value& pair : src.items()) {
        if (!pair.is_list() || pair.items().size() != 2 || !pair.items()[0].is_string()) {
          return arg_error(fn, "expected a sequence of (str key, value) pairs");
        }
        data->set(pair.items()[0].as_string(), pair.items()[1]);
      }
    } else {
      return arg_error(fn, absl::StrCat("cannot build a mapping from ", type_name(src)));
    }
  }
  for (auto& [k, v] : args.keyword) data->set(k, std::move(v));
  return data;
}

}  // namespace

// --- public --------------------------------------------------------------------------------------

absl::StatusOr<std::vector<std::optional<Value>>> bind_args(
    std::string_view fn, CallArgs& args, std::initializer_list<std::string_view> params,
    size_t required) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.positional.size() > params.size()) {
    return arg_error(fn, absl::StrCat("takes at most ", params.size(), " argument(s) (",
                                      args.positional.size(), " given)"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = std::move(args.positional[i]);
  for (auto& [key, value] : args.keyword) {
    const auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end())
      return arg_error(fn, absl::StrCat("got an unexpected keyword argument '", key, "'"));
    auto& slot = out[static_cast<size_t>(it - params.begin())];
    if (slot) return arg_error(fn, absl::StrCat("got multiple values for argument '", key, "'"));
    slot = std::move(value);
  }
  for (size_t i = 0; i < required; ++i) {
    if (!out[i])
      return arg_error(fn,
                       absl::StrCat("missing required argument '", sv(*(params.begin() + i)), "'"));
  }
  return out;
}

absl::StatusOr<std::string> percent_format(std::string_view fmt, const std::vector<Value>& args) {
  std::string out;
  size_t next_arg = 0;
  const auto take = [&]() -> absl::StatusOr<Value> {
    if (next_arg >= args.size())
      return absl::InvalidArgumentError("not enough arguments for format string");
    return args[next_arg++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return absl::InvalidArgumentError("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    if (fmt[i] == '(')
      return absl::UnimplementedError("unsupported Jinja construct: %(name) format conversion");
    std::string spec = "%";
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i]) != nullptr && fmt[i] != '\0')
      spec.push_back(fmt[i++]);
    int width = -1, precision = -1;
    const auto read_num = [&](int& dst) -> absl::Status {
      if (i < fmt.size() && fmt[i] == '*') {
        ++i;
        TESSERA_ASSIGN_OR_RETURN(Value v, take());
        if (!v.is_int()) return absl::InvalidArgumentError("* wants int");
        dst = static_cast<int>(std::clamp<int64_t>(v.as_int(), -4096, 4096));
        return absl::OkStatus();
      }
      int n = 0;
      bool any = false;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        n = std::min(n * 10 + (fmt[i++] - '0'), 4096);
        any = true;
      }
      if (any) dst = n;
      return absl::OkStatus();
    };
    TESSERA_RETURN_IF_ERROR(read_num(width));
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = 0;
      TESSERA_RETURN_IF_ERROR(read_num(precision));
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) return absl::InvalidArgumentError("incomplete format");
    const char conv = fmt[i];
    TESSERA_ASSIGN_OR_RETURN(Value arg, take());
    if (width >= 0) absl::StrAppend(&spec, width);
    if (precision >= 0) absl::StrAppend(&spec, ".", precision);
    char buf[8192];
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::u32string text = utf8_decode(conv == 's' ? arg.str() : arg.repr());
        if (precision >= 0 && text.size() > static_cast<size_t>(precision))
          text.resize(static_cast<size_t>(precision));
        const size_t pad = width > 0 && static_cast<size_t>(width) > text.size()
                               ? static_cast<size_t>(width) - text.size()
                               : 0;
        const bool left = spec.find('-') != std::string::npos;
        if (!left) out.append(pad, ' ');
        out += utf8_encode(text);
        if (left) out.append(pad, ' ');
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'c': {
        int64_t n;
        if (arg.is_float() && conv != 'x' && conv != 'X' && conv != 'o' && conv != 'c') {
          const double d = arg.as_double();
          // Casting NaN, inf or a float beyond int64 is undefined behaviour.
          if (std::isnan(d)) return absl::InvalidArgumentError("cannot convert float NaN to integer");
          if (!(std::fabs(d) < 9.2e18)) {
            return absl::InvalidArgumentError(
                "integer overflow (values beyond 64 bits are not supported)");
          }
          n = static_cast<int64_t>(d);
        } else if (arg.is_int() || arg.is_bool()) {
          n = arg.as_int();
        } else if (conv == 'c' && arg.is_string() && utf8_length(arg.as_string()) == 1) {
          out += arg.as_string();
          break;
        } else {
          return absl::InvalidArgumentError(absl::StrCat(
              "%", std::string(1, conv), " format: a number is required, not ", type_name(arg)));
        }
        if (conv == 'c') {
          utf8_append(out, static_cast<char32_t>(n));
          break;
        }
        spec += "ll";
        spec.push_back(conv == 'i' || conv == 'u' ? 'd' : conv);
        std::snprintf(buf, sizeof(buf), spec.c_str(), static_cast<long long>(n));
        out += buf;
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!arg.is_number()) {
          return absl::InvalidArgumentError(absl::StrCat("%", std::string(1, conv),
                                                         " format: a real number is required, not ",
                                                         type_name(arg)));
        }
        spec.push_back(conv);
        std::snprintf(buf, sizeof(buf), spec.c_str(), arg.as_double());
        out += buf;
        break;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("unsupported format character '", std::string(1, conv), "'"));
    }
  }
  if (next_arg < args.size())
    return absl::InvalidArgumentError("not all arguments converted during string formatting");
  return out;
}

Support test_support(std::string_view name) {
  return find_test(name) != nullptr ? Support::kSupported : Support::kUnknown;
}

absl::StatusOr<bool> apply_test(Interpreter& in, std::string_view name, const Value& input,
                                CallArgs& args) {
  const TestEntry* t = find_test(name);
  if (t == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("no test named '", sv(name), "'"));
  return t->fn(in, input, args);
}

std::optional<Value> find_method(const Value& obj, std::string_view name) {
  if (obj.is_lazy()) return std::nullopt;  // a generator has no list methods
  const auto bound = [&](auto impl) {
    Value self = obj;
    std::string method(name);
    return Value::callable(
        method, [self, method, impl](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
          return impl(in, self, method, args);
        });
  };
  if (obj.is_string()) {
    if (!in_list(name, std::begin(kStringMethods), std::end(kStringMethods))) return std::nullopt;
    return bound([](Interpreter& in, const Value& self, const std::string& m, CallArgs& args) {
      return string_method(in, self.as_string(), m, args);
    });
  }
  if (obj.is_dict() && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return bound([](Interpreter&, const Value& self, const std::string& m, CallArgs& args) {
      return dict_method(self, m, args);
    });
  }
  if (obj.is_list() && (name == "index" || name == "count")) {
    return bound([](Interpreter&, const Value& self, const std::string& m, CallArgs& args) {
      return list_method(self, m, args);
    });
  }
  if ((obj.is_dict() || obj.is_list()) &&
      in_list(name, std::begin(kMutatingMethods), std::end(kMutatingMethods))) {
    return bound([](Interpreter&, const Value& self, const std::string& m,
                    CallArgs&) -> absl::StatusOr<Value> {
      return absl::InvalidArgumentError(
          absl::StrCat("access to attribute '", m, "' of '", type_name(self),
                       "' object is unsafe (the template sandbox is immutable)"));
    });
  }
  return std::nullopt;
}

DictData make_globals() {
  DictData g;
  g.set("range", Value::callable("range", global_range));
  g.set("namespace",
        Value::callable("namespace", [](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
          TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<DictData> data,
                                   build_mapping("namespace", args));
          in.track_namespace(data);
          return Value::make_namespace(std::move(data));
        }));
  g.set("dict", Value::callable("dict", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
          TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<DictData> data, build_mapping("dict", args));
          return Value::dict(std::move(data));
        }));
  g.set("raise_exception",
        Value::callable(
            "raise_exception", [](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
              TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("raise_exception", args, {"message"}, 1));
              return in.raise(a[0]->str());
            }));
  g.set("strftime_now",
        Value::callable("strftime_now", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
          TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("strftime_now", args, {"format"}, 1));
          if (!a[0]->is_string()) return arg_error("strftime_now", "format must be a str");
          const std::time_t now = std::time(nullptr);
          std::tm local{};
          localtime_r(&now, &local);
          std::string buf(256, '\0');
          for (int attempt = 0; attempt < 4; ++attempt) {
            const size_t n =
                std::strftime(buf.data(), buf.size(), a[0]->as_string().c_str(), &local);
            if (n > 0 || a[0]->as_string().empty()) {
              buf.resize(n);
              return Value::string(std::move(buf));
            }
            buf.resize(buf.size() * 4);
          }
          return arg_error("strftime_now", "formatted time too long");
        }));
  return g;
}

}  // namespace tessera::jinja
