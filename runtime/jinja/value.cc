#include "runtime/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "runtime/jinja/strings.h"

namespace tessera::jinja {
namespace {

// Containers nest; anything deeper than this is hostile input, not a chat.
constexpr int kMaxNesting = 256;

// Python's int/float comparison is exact; converting an int64 to double is not.
int compare_int_double(int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  const double fl = std::floor(d);
  const auto fi = static_cast<int64_t>(fl);
  if (i != fi) return i < fi ? -1 : 1;
  return d > fl ? -1 : 0;
}

int compare_numbers(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) {
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_float() && b.is_float()) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_float()) return -compare_int_double(b.as_int(), a.as_double());
  return compare_int_double(a.as_int(), b.as_double());
}

// Code points Python's str.isprintable() rejects, beyond the ASCII controls: the Zs/Zl/Zp
// separators other than space, the common format (Cf) characters, surrogates and private use.
bool is_unprintable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return true;
  if (c < 0x80) return false;
  if (c <= 0xa0 || c == 0xad) return true;
  if (c >= 0x600 && c <= 0x605) return true;
  if (c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x1680 || c == 0x180e) return true;
  if (c >= 0x2000 && c <= 0x200f) return true;
  if (c >= 0x2028 && c <= 0x202f) return true;
  if (c >= 0x205f && c <= 0x206f) return true;
  if (c == 0x3000 || c == 0xfeff) return true;
  if (c >= 0xd800 && c <= 0xf8ff) return true;
  if (c >= 0xfff9 && c <= 0xfffb) return true;
  if (c == 0xfffe || c == 0xffff || c >= 0xf0000) return true;
  return false;
}

void append_hex(std::string& out, char32_t c, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out.push_back(kHex[(c >> (4 * i)) & 0xf]);
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  const auto escape_unit = [&out](uint32_t u) {
    out += "\\u";
    append_hex(out, u, 4);
  };
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (c < 0x20) {
            escape_unit(c);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    if (!ensure_ascii) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    // ensure_ascii: decode one code point and write \uXXXX (a surrogate pair above the BMP).
    size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xc0) == 0x80) ++j;
    const std::u32string cps = utf8_decode(s.substr(i, j - i));
    for (char32_t cp : cps) {
      if (cp >= 0x10000) {
        cp -= 0x10000;
        escape_unit(0xd800 + (cp >> 10));
        escape_unit(0xdc00 + (cp & 0x3ff));
      } else {
        escape_unit(cp);
      }
    }
    i = j;
  }
  out.push_back('"');
}

absl::Status dump_json_rec(const Value& v, const JsonDumpOptions& opt, int level,
                           std::string& out) {
  if (level > kMaxNesting) return absl::InvalidArgumentError("tojson: value nested too deeply");
  const auto newline = [&](int lvl) {
    out.push_back('\n');
    for (int k = 0; k < lvl; ++k) out += *opt.indent;
  };
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return absl::OkStatus();
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return absl::OkStatus();
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return absl::OkStatus();
    case Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += python_float_repr(d);
      }
      return absl::OkStatus();
    }
    case Kind::kString:
      append_json_string(out, v.as_string(), opt.ensure_ascii);
      return absl::OkStatus();
    case Kind::kList: {
      if (v.is_lazy()) {
        return absl::InvalidArgumentError(
            "tojson: Object of type generator is not JSON serializable");
      }
      if (v.items().empty()) {
        out += "[]";
        return absl::OkStatus();
      }
      out.push_back('[');
      bool first = true;
      for (const Value& item : v.items()) {
        if (!first) out += opt.item_separator;
        first = false;
        if (opt.indent) newline(level + 1);
        TESSERA_RETURN_IF_ERROR(dump_json_rec(item, opt, level + 1, out));
      }
      if (opt.indent) newline(level);
      out.push_back(']');
      return absl::OkStatus();
    }
    case Kind::kDict: {
      const auto& entries = v.as_dict().entries;
      if (entries.empty()) {
        out += "{}";
        return absl::OkStatus();
      }
      std::vector<const std::pair<std::string, Value>*> order;
      order.reserve(entries.size());
      for (const auto& e : entries) order.push_back(&e);
      if (opt.sort_keys) {
        std::stable_sort(order.begin(), order.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* e : order) {
        if (!first) out += opt.item_separator;
        first = false;
        if (opt.indent) newline(level + 1);
        append_json_string(out, e->first, opt.ensure_ascii);
        out += opt.key_separator;
        TESSERA_RETURN_IF_ERROR(dump_json_rec(e->second, opt, level + 1, out));
      }
      if (opt.indent) newline(level);
      out.push_back('}');
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tojson: Object of type ", type_name(v), " is not JSON serializable"));
  }
}

template <typename Json>
absl::StatusOr<Value> from_json_rec(const Json& j, int depth) {
  if (depth > kMaxNesting) return absl::InvalidArgumentError("JSON value nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        TESSERA_ASSIGN_OR_RETURN(Value item, from_json_rec(e, depth + 1));
        items.push_back(std::move(item));
      }
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto data = std::make_shared<DictData>();
      data->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        TESSERA_ASSIGN_OR_RETURN(Value item, from_json_rec(it.value(), depth + 1));
        data->entries.emplace_back(it.key(), std::move(item));
      }
      return Value::dict(std::move(data));
    }
    default:
      return absl::InvalidArgumentError("unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

// --- DictData ------------------------------------------------------------------------------------

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

// --- Value ---------------------------------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::make_shared<const ListData>(ListData{std::move(items), false});
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::make_shared<const ListData>(ListData{std::move(items), true});
  return v;
}

Value Value::generator(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->lazy = true;
  v.data_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

std::vector<Value> Value::consume() const {
  const ListData& d = list_data();
  if (d.consumed) return {};
  d.consumed = true;
  return d.items;
}

Value Value::dict(std::shared_ptr<DictData> data) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::move(data);
  return v;
}

Value Value::dict(DictData data) {
  return dict(std::make_shared<DictData>(std::move(data)));
}

Value Value::make_namespace(std::shared_ptr<DictData> data) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::move(data);
  return v;
}

Value Value::callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

std::string Value::undefined_hint() const {
  if (const auto* s = std::get_if<StringPtr>(&data_); s != nullptr && *s != nullptr) return **s;
  return "value is undefined";
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& d) -> const void* {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, StringPtr> || std::is_same_v<T, ListPtr> ||
                      std::is_same_v<T, DictPtr> || std::is_same_v<T, CallablePtr>) {
          return d.get();
        } else {
          return nullptr;
        }
      },
      data_);
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return is_lazy() || !items().empty();
    case Kind::kDict:
      return !as_dict().entries.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  std::string out;
  append_repr(out, 0);
  return out;
}

void Value::append_repr(std::string& out, int depth) const {
  if (depth > kMaxNesting) {
    out += "...";
    return;
  }
  switch (kind_) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += as_bool() ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(as_int());
      return;
    case Kind::kFloat:
      out += python_float_repr(as_double());
      return;
    case Kind::kString:
      out += python_string_repr(as_string());
      return;
    case Kind::kList: {
      if (is_lazy()) {  // Python shows "<generator object ... at 0x...>"
        out += "<generator object>";
        return;
      }
      const bool tuple = is_tuple();
      out.push_back(tuple ? '(' : '[');
      bool first = true;
      for (const Value& item : items()) {
        if (!first) out += ", ";
        first = false;
        item.append_repr(out, depth + 1);
      }
      if (tuple && items().size() == 1) out.push_back(',');
      out.push_back(tuple ? ')' : ']');
      return;
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      if (kind_ == Kind::kNamespace) out += "<Namespace ";
      out.push_back('{');
      bool first = true;
      for (const auto& [k, v] : as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += python_string_repr(k);
        out += ": ";
        v.append_repr(out, depth + 1);
      }
      out.push_back('}');
      if (kind_ == Kind::kNamespace) out.push_back('>');
      return;
    }
    case Kind::kCallable:
      out += absl::StrCat("<function ", as_callable().name, ">");
      return;
  }
}

// --- free functions ------------------------------------------------------------------------------

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return v.is_lazy() ? "generator" : (v.is_tuple() ? "tuple" : "list");
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if ((a.is_float() && std::isnan(a.as_double())) ||
        (b.is_float() && std::isnan(b.as_double()))) {
      return false;
    }
    return compare_numbers(a, b) == 0;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.as_string() == b.as_string();
    case Kind::kList: {
      if (a.is_lazy() || b.is_lazy()) return a.identity() == b.identity();
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const auto& x = a.as_dict().entries;
      const auto& y = b.as_dict();
      if (x.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = y.find(k);
        if (other == nullptr || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

absl::StatusOr<int> compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b);
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_lazy() && !b.is_lazy()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' not supported between instances of '",
                                                 type_name(a), "' and '", type_name(b), "'"));
}

absl::StatusOr<bool> contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!needle.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'in <string>' requires string as left operand, not ", type_name(needle)));
      }
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Kind::kList: {
      const std::vector<Value> rest =
          haystack.is_lazy() ? haystack.consume() : std::vector<Value>{};
      for (const Value& item : haystack.is_lazy() ? rest : haystack.items()) {
        if (values_equal(item, needle)) return true;
      }
      return false;
    }
    case Kind::kDict:
      if ((needle.is_list() && !needle.is_tuple()) || needle.is_dict() || needle.is_namespace()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unhashable type: '", type_name(needle), "'"));
      }
      return needle.is_string() && haystack.as_dict().find(needle.as_string()) != nullptr;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("argument of type '", type_name(haystack), "' is not iterable"));
  }
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // [-]d[.ddd]e[+-]xx
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  int exp = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp);
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      const auto int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out.push_back('.');
        out += digits.substr(int_len);
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    }
    return out;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  out.push_back('e');
  out.push_back(exp < 0 ? '-' : '+');
  const int mag = std::abs(exp);
  if (mag < 10) out.push_back('0');
  out += std::to_string(mag);
  return out;
}

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_unprintable(c)) {
      if (c < 0x100) {
        out += "\\x";
        append_hex(out, c, 2);
      } else if (c < 0x10000) {
        out += "\\u";
        append_hex(out, c, 4);
      } else {
        out += "\\U";
        append_hex(out, c, 8);
      }
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

absl::StatusOr<Value> value_from_json(const nlohmann::json& j) {
  return from_json_rec(j, 0);
}
absl::StatusOr<Value> value_from_json(const nlohmann::ordered_json& j) {
  return from_json_rec(j, 0);
}

absl::StatusOr<std::string> dump_json(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  TESSERA_RETURN_IF_ERROR(dump_json_rec(v, options, 0, out));
  return out;
}

}  // namespace tessera::jinja
