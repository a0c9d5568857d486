// Jinja's built-in filters (jinja2/filters.py semantics), plus transformers' tojson override.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/jinja/builtins.h"
#include "runtime/jinja/interpreter.h"
#include "runtime/jinja/strings.h"

namespace tessera::jinja {
namespace {

using FilterFn = absl::StatusOr<Value> (*)(Interpreter&, const Value&, CallArgs&);

absl::Status filter_error(std::string_view filter, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("filter '", sv(filter), "': ", sv(message)));
}

absl::StatusOr<std::vector<Value>> sequence(std::string_view filter, const Value& v) {
  if (v.is_namespace() || v.is_none() || v.is_number() || v.is_callable()) {
    return filter_error(filter, absl::StrCat("'", type_name(v), "' object is not iterable"));
  }
  return iterate(v);
}

Value lower_if_string(const Value& v) {
  if (v.is_string()) return Value::string(pystr::lower(v.as_string()));
  if (v.is_tuple()) {
    std::vector<Value> items;
    for (const Value& x : v.items()) items.push_back(lower_if_string(x));
    return Value::tuple(std::move(items));
  }
  return v;
}

// jinja2 make_attrgetter: "a.b.0" walks getitem (item first, then attribute); digit parts index.
absl::StatusOr<Value> lookup_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_int()) return in.get_item(item, attribute);
  const std::string path = attribute.str();
  Value cur = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    const Value key =
        digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part);
    TESSERA_ASSIGN_OR_RETURN(cur, in.get_item(cur, key));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort/min/max/unique key: the attribute(s) (comma-separated for several), case-folded unless
// case_sensitive.
absl::StatusOr<Value> sort_key(Interpreter& in, const Value& item,
                               const std::optional<Value>& attribute, bool case_sensitive) {
  Value key = item;
  if (attribute && !attribute->is_none()) {
    const std::string spec = attribute->str();
    if (attribute->is_string() && spec.find(',') != std::string::npos) {
      std::vector<Value> parts;
      for (const std::string& a : pystr::split(spec, std::string(","), -1)) {
        TESSERA_ASSIGN_OR_RETURN(
            Value part,
            lookup_path(in, item, Value::string(pystr::strip(a, std::nullopt, true, true))));
        parts.push_back(std::move(part));
      }
      key = Value::tuple(std::move(parts));
    } else {
      TESSERA_ASSIGN_OR_RETURN(key, lookup_path(in, item, *attribute));
    }
  }
  return case_sensitive ? key : lower_if_string(key);
}

// Stable sort of `items` by `keys`; `reverse` keeps equal keys in order, like Python.
absl::Status sort_by_keys(std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    absl::StatusOr<int> c = compare_values(keys[a], keys[b]);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  TESSERA_RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
  return absl::OkStatus();
}

bool flag(const std::optional<Value>& v) {
  return v && v->truthy();
}

// --- filters -------------------------------------------------------------------------------------

absl::StatusOr<Value> f_abs(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("abs", args, {}).status());
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (!v.is_number())
    return filter_error("abs", absl::StrCat("bad operand type for abs(): '", type_name(v), "'"));
  if (v.as_int() == INT64_MIN) return filter_error("abs", "integer overflow");
  return Value::integer(std::llabs(v.as_int()));
}

absl::StatusOr<Value> f_attr(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("attr", args, {"name"}, 1));
  const std::string name = a[0]->str();
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  // Sandboxed getattr: only real attributes, never dict items.
  if (v.is_namespace()) {
    if (const Value* x = v.as_dict().find(name)) return *x;
  } else if (auto m = find_method(v, name)) {
    return *m;
  }
  return Value::undefined(
      absl::StrCat("'", type_name(v), " object' has no attribute '", name, "'"));
}

absl::StatusOr<Value> f_batch(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("batch", args, {"linecount", "fill_with"}, 1));
  if (!a[0]->is_int() || a[0]->as_int() <= 0)
    return filter_error("batch", "linecount must be a positive int");
  const auto n = static_cast<size_t>(a[0]->as_int());
  // fill_with pads the last batch to linecount items: a list that long must be allowed.
  if (a[1]) TESSERA_RETURN_IF_ERROR(in.check_list_size(n));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("batch", v));
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); i += n) {
    std::vector<Value> chunk(
        items.begin() + static_cast<std::ptrdiff_t>(i),
        items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + n)));
    if (chunk.size() < n && a[1]) chunk.resize(n, *a[1]);
    out.push_back(Value::list(std::move(chunk)));
  }
  return Value::generator(std::move(out));
}

absl::StatusOr<Value> f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("capitalize", args, {}).status());
  return Value::string(pystr::capitalize(v.str()));
}

absl::StatusOr<Value> f_default(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("default", args, {"default_value", "boolean"}));
  if (v.is_undefined() || (flag(a[1]) && !v.truthy())) return a[0] ? *a[0] : Value::string("");
  return v;
}

absl::StatusOr<Value> f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a,
                           bind_args("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return filter_error("dictsort", "expects a dict");
  const std::string by = a[1] ? a[1]->str() : "key";
  if (by != "key" && by != "value")
    return filter_error("dictsort", "you can only sort by either 'key' or 'value'");
  std::vector<Value> pairs, keys;
  for (const auto& [k, x] : v.as_dict().entries) {
    pairs.push_back(Value::tuple({Value::string(k), x}));
    const Value& key = by == "key" ? pairs.back().items()[0] : x;
    keys.push_back(flag(a[0]) ? key : lower_if_string(key));
  }
  TESSERA_RETURN_IF_ERROR(sort_by_keys(pairs, keys, flag(a[2])));
  return Value::list(std::move(pairs));
}

absl::StatusOr<Value> f_escape(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("escape", args, {}).status());
  if (v.is_markup()) return v;  // already safe: never escaped twice
  return Value::markup(pystr::html_escape(v.str()));
}

absl::StatusOr<Value> f_forceescape(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("forceescape", args, {}).status());
  return Value::markup(pystr::html_escape(v.str()));
}

absl::StatusOr<Value> f_first_last(const Value& v, CallArgs& args, bool last) {
  const char* name = last ? "last" : "first";
  TESSERA_RETURN_IF_ERROR(bind_args(name, args, {}).status());
  if (last && v.is_lazy()) return filter_error(name, "'generator' object is not reversible");
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence(name, v));
  if (items.empty())
    return Value::undefined(absl::StrCat("No ", name, " item, sequence was empty."));
  return last ? items.back() : items.front();
}
absl::StatusOr<Value> f_first(Interpreter&, const Value& v, CallArgs& args) {
  return f_first_last(v, args, false);
}
absl::StatusOr<Value> f_last(Interpreter&, const Value& v, CallArgs& args) {
  return f_first_last(v, args, true);
}

// Python float(str): optional sign, digits with underscores, inf/nan.
std::optional<double> parse_python_float(std::string s) {
  s = pystr::strip(s, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() &&
        std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    clean.push_back(s[i]);
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos)
    return std::nullopt;  // no hex floats
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

absl::StatusOr<Value> f_float(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("float", args, {"default"}));
  const Value dflt = a[0] ? *a[0] : Value::number(0.0);
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_python_float(v.as_string())) return Value::number(*d);
  }
  return dflt;
}

absl::StatusOr<Value> f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.keyword.empty())
    return absl::UnimplementedError("unsupported Jinja construct: |format with keyword arguments");
  TESSERA_ASSIGN_OR_RETURN(std::string out, percent_format(v.str(), args.positional));
  return Value::string(std::move(out));
}

absl::StatusOr<Value> f_indent(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("indent", args, {"width", "first", "blank"}));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->as_string();
    } else if (a[0]->is_int() || a[0]->is_bool()) {
      indention.assign(static_cast<size_t>(std::clamp<int64_t>(a[0]->as_int(), 0, 4096)), ' ');
    } else {
      return filter_error("indent", "width must be an int or a str");
    }
  }
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  // jinja2 appends a newline before splitlines() so that a trailing newline is kept.
  const std::vector<std::string> lines = pystr::splitlines(v.str() + "\n");
  std::string out;
  if (flag(a[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) absl::StrAppend(&out, "\n", indention);
      out += lines[i];
    }
  } else if (!lines.empty()) {
    out = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (flag(a[1])) out = indention + out;
  return Value::string(std::move(out));
}

absl::StatusOr<Value> f_int(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("int", args, {"default", "base"}));
  const Value dflt = a[0] ? *a[0] : Value::integer(0);
  int base = 10;
  if (a[1]) {
    if (!a[1]->is_int() || a[1]->as_int() < 0 || a[1]->as_int() > 36 || a[1]->as_int() == 1) {
      return filter_error("int", "base must be 0 or 2..36");
    }
    base = static_cast<int>(a[1]->as_int());
  }
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return dflt;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return dflt;
  std::string s = pystr::strip(v.as_string(), std::nullopt, true, true);
  std::string clean;
  for (char c : s) {
    if (c != '_') clean.push_back(c);
  }
  const bool neg = !clean.empty() && clean[0] == '-';
  std::string body =
      (!clean.empty() && (clean[0] == '-' || clean[0] == '+')) ? clean.substr(1) : clean;
  int eff_base = base;
  if (body.size() > 2 && body[0] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(body[1])));
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      body = body.substr(2);
      eff_base = prefixed;
    }
  }
  if (eff_base == 0) eff_base = 10;
  if (!body.empty() && std::isalnum(static_cast<unsigned char>(body[0]))) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(body.c_str(), &end, eff_base);
    if (end == body.c_str() + body.size() && errno == 0) return Value::integer(neg ? -n : n);
  }
  // jinja2: "42.23"|int is 42.
  if (auto d = parse_python_float(v.as_string());
      d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
    return Value::integer(static_cast<int64_t>(*d));
  }
  return dflt;
}

absl::StatusOr<Value> f_items(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("items", args, {}).status());
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) return filter_error("items", "can only get item pairs from a mapping");
  std::vector<Value> out;
  for (const auto& [k, x] : v.as_dict().entries) out.push_back(Value::tuple({Value::string(k), x}));
  return Value::generator(std::move(out));
}

absl::StatusOr<Value> f_join(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("join", args, {"d", "attribute"}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("join", v));
  const std::string sep = a[0] ? a[0]->str() : "";
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (a[1] && !a[1]->is_none()) {
      TESSERA_ASSIGN_OR_RETURN(item, lookup_path(in, item, *a[1]));
    }
    if (i > 0) out += sep;
    out += item.str();
    TESSERA_RETURN_IF_ERROR(in.check_string_size(out.size()));
  }
  return Value::string(std::move(out));
}

absl::StatusOr<Value> f_length(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("length", args, {}).status());
  switch (v.kind()) {
    case Kind::kUndefined:
      return Value::integer(0);
    case Kind::kString:
      return Value::integer(static_cast<int64_t>(utf8_length(v.as_string())));
    case Kind::kList:
      if (v.is_lazy()) return filter_error("length", "object of type 'generator' has no len()");
      return Value::integer(static_cast<int64_t>(v.items().size()));
    case Kind::kDict:
      return Value::integer(static_cast<int64_t>(v.as_dict().entries.size()));
    default:
      return filter_error("length",
                          absl::StrCat("object of type '", type_name(v), "' has no len()"));
  }
}

absl::StatusOr<Value> f_list(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("list", args, {}).status());
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("list", v));
  return Value::list(std::move(items));
}

absl::StatusOr<Value> f_lower(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("lower", args, {}).status());
  return Value::string(pystr::lower(v.str()));
}

absl::StatusOr<Value> f_upper(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("upper", args, {}).status());
  return Value::string(pystr::upper(v.str()));
}

absl::StatusOr<Value> f_map(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("map", v));
  std::vector<Value> out;
  out.reserve(items.size());
  const bool by_attribute = std::any_of(args.keyword.begin(), args.keyword.end(),
                                        [](const auto& kw) { return kw.first == "attribute"; });
  if (by_attribute) {
    TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("map", args, {"attribute", "default"}));
    if (!args.positional.empty())
      return filter_error("map", "attribute= takes no positional arguments");
    for (const Value& item : items) {
      TESSERA_ASSIGN_OR_RETURN(Value x, lookup_path(in, item, *a[0]));
      out.push_back(x.is_undefined() && a[1] ? *a[1] : std::move(x));
    }
    return Value::generator(std::move(out));
  }
  if (args.positional.empty()) return filter_error("map", "expects a filter name or attribute=");
  const std::string filter = args.positional[0].str();
  if (filter_support(filter) != Support::kSupported)
    return filter_error("map", absl::StrCat("no filter named '", filter, "'"));
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs call = rest;
    TESSERA_ASSIGN_OR_RETURN(Value x, apply_filter(in, filter, item, call));
    out.push_back(std::move(x));
  }
  return Value::generator(std::move(out));
}

absl::StatusOr<Value> f_min_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  const char* name = want_max ? "max" : "min";
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"case_sensitive", "attribute"}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence(name, v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  TESSERA_ASSIGN_OR_RETURN(Value best_key, sort_key(in, items[0], a[1], flag(a[0])));
  for (size_t i = 1; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Value key, sort_key(in, items[i], a[1], flag(a[0])));
    TESSERA_ASSIGN_OR_RETURN(int c, compare_values(key, best_key));
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}
absl::StatusOr<Value> f_max(Interpreter& in, const Value& v, CallArgs& args) {
  return f_min_max(in, v, args, true);
}
absl::StatusOr<Value> f_min(Interpreter& in, const Value& v, CallArgs& args) {
  return f_min_max(in, v, args, false);
}

absl::StatusOr<Value> select_impl(Interpreter& in, const Value& v, CallArgs& args,
                                  std::string_view name, bool by_attribute, bool keep) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence(name, v));
  size_t pos = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) return filter_error(name, "missing the attribute argument");
    attribute = args.positional[pos++];
  }
  std::optional<std::string> test;
  if (pos < args.positional.size()) {
    test = args.positional[pos++].str();
    if (test_support(*test) != Support::kSupported)
      return filter_error(name, absl::StrCat("no test named '", *test, "'"));
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(pos),
                              args.positional.end());
  test_args.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attribute) {
      TESSERA_ASSIGN_OR_RETURN(x, lookup_path(in, item, attribute));
    }
    bool r = x.truthy();
    if (test) {
      CallArgs call = test_args;
      TESSERA_ASSIGN_OR_RETURN(r, apply_test(in, *test, x, call));
    }
    if (r == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}
absl::StatusOr<Value> f_select(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, "select", false, true);
}
absl::StatusOr<Value> f_reject(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, "reject", false, false);
}
absl::StatusOr<Value> f_selectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, "selectattr", true, true);
}
absl::StatusOr<Value> f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, "rejectattr", true, false);
}

absl::StatusOr<Value> f_replace(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("replace", args, {"old", "new", "count"}, 2));
  int64_t count = -1;
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_int()) return filter_error("replace", "count must be an int");
    count = a[2]->as_int();
  }
  std::optional<std::string> out =
      pystr::replace(v.str(), a[0]->str(), a[1]->str(), count, in.limits().max_output_bytes);
  if (!out) return in.check_string_size(SIZE_MAX);  // the limit's error
  TESSERA_RETURN_IF_ERROR(in.check_string_size(out->size()));
  return Value::string(*std::move(out));
}

absl::StatusOr<Value> f_reverse(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("reverse", args, {}).status());
  if (v.is_string()) {
    std::u32string cps = utf8_decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  const bool was_lazy = v.is_lazy();
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("reverse", v));
  std::reverse(items.begin(), items.end());
  // reversed(seq) is an iterator; a generator is not reversible, so jinja2 falls back to a list.
  return was_lazy ? Value::list(std::move(items)) : Value::generator(std::move(items));
}

absl::StatusOr<Value> f_round(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("round", args, {"precision", "method"}));
  int64_t precision = 0;
  if (a[0]) {
    if (!a[0]->is_int() && !a[0]->is_bool())
      return filter_error("round", "precision must be an int");
    precision = a[0]->as_int();
  }
  const std::string method = a[1] ? a[1]->str() : "common";
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_hint());
  if (!v.is_number())
    return filter_error("round",
                        absl::StrCat("type ", type_name(v), " doesn't define __round__ method"));
  const double x = v.as_double();
  if (method == "common") {
    if (!v.is_float()) {
      if (precision >= 0) return Value::integer(v.as_int());
      if (precision < -19) return Value::integer(0);  // |v| < 10^19 / 2
      // Exactly, in 128 bits, half to even like Python (through a double it lost digits and
      // overflowed: 9223372036854775807|round(-1) is beyond int64).
      __int128 m = 1;
      for (int64_t i = 0; i < -precision; ++i) m *= 10;
      const __int128 n = v.as_int();
      __int128 q = n / m;
      const __int128 r = n % m;  // the sign of n
      const __int128 twice = 2 * (r < 0 ? -r : r);
      if (twice > m || (twice == m && q % 2 != 0)) q += n < 0 ? -1 : 1;
      const __int128 rounded = q * m;
      if (rounded > std::numeric_limits<int64_t>::max() ||
          rounded < std::numeric_limits<int64_t>::min()) {
        return absl::InvalidArgumentError(
            "integer overflow (values beyond 64 bits are not supported)");
      }
      return Value::integer(static_cast<int64_t>(rounded));
    }
    if (!std::isfinite(x) || precision > 300) return Value::number(x);
    if (precision == 0) return Value::number(std::nearbyint(x));  // ties to even, like Python
    if (precision > 0) {
      // printf rounds the exact binary value half-to-even: the same as Python's round().
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
      return Value::number(std::strtod(buf, nullptr));
    }
    if (precision < -308) return Value::number(std::copysign(0.0, x));  // 10^-precision is inf
    const double p = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(x / p) * p);
  }
  if (method == "ceil" || method == "floor") {
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double scaled = x * p;
    return Value::number((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / p);
  }
  return filter_error("round", "method must be 'common', 'ceil' or 'floor'");
}

absl::StatusOr<Value> f_safe(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("safe", args, {}).status());
  if (v.is_markup()) return v;
  return Value::markup(v.str());
}

absl::StatusOr<Value> f_sort(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a,
                           bind_args("sort", args, {"reverse", "case_sensitive", "attribute"}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("sort", v));
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    TESSERA_ASSIGN_OR_RETURN(Value key, sort_key(in, item, a[2], flag(a[1])));
    keys.push_back(std::move(key));
  }
  TESSERA_RETURN_IF_ERROR(sort_by_keys(items, keys, flag(a[0])));
  return Value::list(std::move(items));
}

absl::StatusOr<Value> f_string(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("string", args, {}).status());
  if (v.is_lazy()) {
    return absl::UnimplementedError(
        "unsupported Jinja construct: |string of a generator (Python prints its address)");
  }
  return Value::string(v.str());
}

absl::StatusOr<Value> f_sum(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("sum", args, {"attribute", "start"}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("sum", v));
  Value total = a[1] ? *a[1] : Value::integer(0);
  for (const Value& item : items) {
    Value x = item;
    if (a[0] && !a[0]->is_none()) {
      TESSERA_ASSIGN_OR_RETURN(x, lookup_path(in, item, *a[0]));
    }
    if (!total.is_number() || !x.is_number()) {
      return filter_error("sum", absl::StrCat("unsupported operand type(s) for +: '",
                                              type_name(total), "' and '", type_name(x), "'"));
    }
    if (total.is_float() || x.is_float()) {
      total = Value::number(total.as_double() + x.as_double());
    } else {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r))
        return filter_error("sum", "integer overflow");
      total = Value::integer(r);
    }
  }
  return total;
}

// jinja2's do_title: capitalizes after '-', whitespace and opening brackets (not str.title()).
absl::StatusOr<Value> f_title(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_RETURN_IF_ERROR(bind_args("title", args, {}).status());
  std::string out;
  bool word_start = true;
  for (char32_t c : utf8_decode(v.str())) {
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_python_space(c);
    std::string ch;
    utf8_append(ch, c);
    if (sep) {
      out += ch;
      word_start = true;
    } else {
      out += word_start ? pystr::upper(ch) : pystr::lower(ch);
      word_start = false;
    }
  }
  return Value::string(std::move(out));
}

// transformers replaces Jinja's tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), without HTML escaping.
absl::StatusOr<Value> f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(
      auto a, bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions opt;
  opt.ensure_ascii = flag(a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      opt.indent = a[1]->as_string();
    } else if (a[1]->is_int() || a[1]->is_bool()) {
      opt.indent =
          std::string(static_cast<size_t>(std::clamp<int64_t>(a[1]->as_int(), 0, 4096)), ' ');
    } else {
      return filter_error("tojson", "indent must be an int or a str");
    }
    opt.item_separator.assign(1, ',');  // not = ",": gcc 12 -Wrestrict false positive
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_list() || a[2]->items().size() != 2 || !a[2]->items()[0].is_string() ||
        !a[2]->items()[1].is_string()) {
      return filter_error("tojson", "separators must be a pair of strings");
    }
    opt.item_separator = a[2]->items()[0].as_string();
    opt.key_separator = a[2]->items()[1].as_string();
  }
  opt.sort_keys = flag(a[3]);
  TESSERA_ASSIGN_OR_RETURN(std::string out, dump_json(v, opt));
  return Value::string(std::move(out));
}

absl::StatusOr<Value> f_trim(Interpreter&, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("trim", args, {"chars"}));
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) chars = a[0]->str();
  return Value::string(pystr::strip(v.str(), chars, true, true));
}

absl::StatusOr<Value> f_unique(Interpreter& in, const Value& v, CallArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(auto a, bind_args("unique", args, {"case_sensitive", "attribute"}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> items, sequence("unique", v));
  std::vector<Value> out, seen;
  for (const Value& item : items) {
    TESSERA_ASSIGN_OR_RETURN(Value key, sort_key(in, item, a[1], flag(a[0])));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); }))
      continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
};

// Real Jinja filters left out: nothing in mainstream chat templates uses them.
constexpr std::string_view kUnsupportedFilters[] = {
    "center",   "filesizeformat", "groupby", "pprint",    "random",   "slice",  "striptags",
    "truncate", "urlencode",      "urlize",  "wordcount", "wordwrap", "xmlattr"};

const FilterEntry* find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

Support filter_support(std::string_view name) {
  if (find_filter(name) != nullptr) return Support::kSupported;
  if (std::find(std::begin(kUnsupportedFilters), std::end(kUnsupportedFilters), name) !=
      std::end(kUnsupportedFilters)) {
    return Support::kUnsupported;
  }
  return Support::kUnknown;
}

absl::StatusOr<Value> apply_filter(Interpreter& in, std::string_view name, const Value& input,
                                   CallArgs& args) {
  const FilterEntry* f = find_filter(name);
  if (f == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("no filter named '", sv(name), "'"));
  return f->fn(in, input, args);
}

}  // namespace tessera::jinja
