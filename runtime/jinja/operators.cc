#include "runtime/jinja/operators.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/jinja/builtins.h"
#include "runtime/jinja/interpreter.h"
#include "runtime/jinja/strings.h"

namespace tessera::jinja {
namespace {

absl::Status type_error(std::string_view message) {
  return absl::InvalidArgumentError(sv(message));
}

absl::Status operand_error(std::string_view op, const Value& a, const Value& b) {
  return type_error(absl::StrCat("unsupported operand type(s) for ", sv(op), ": '", type_name(a),
                                 "' and '", type_name(b), "'"));
}

absl::Status overflow_error() {
  return absl::InvalidArgumentError("integer overflow (values beyond 64 bits are not supported)");
}

// Python's float modulo: the result takes the divisor's sign.
double py_fmod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

// Python's float floor division (float_floor_div in CPython).
double py_floordiv(double x, double y) {
  const double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, x / y);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

absl::StatusOr<Value> repeat(const Value& seq, int64_t n, Interpreter& in) {
  const size_t count = n > 0 ? static_cast<size_t>(n) : 0;
  // An empty sequence or count is empty at once (the loops below ran `count` times even for ''),
  // and the size check must not wrap: 4 bytes * 2^62 is 0 in size_t.
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (count == 0 || s.empty()) return Value::string("");
    TESSERA_RETURN_IF_ERROR(
        in.check_string_size(count > SIZE_MAX / s.size() ? SIZE_MAX : s.size() * count));
    std::string out;
    out.reserve(s.size() * count);
    for (size_t i = 0; i < count; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.items();
  if (count == 0 || items.empty()) return seq.is_tuple() ? Value::tuple({}) : Value::list({});
  TESSERA_RETURN_IF_ERROR(
      in.check_list_size(count > SIZE_MAX / items.size() ? SIZE_MAX : items.size() * count));
  std::vector<Value> out;
  out.reserve(items.size() * count);
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

absl::StatusOr<Value> int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) return absl::InvalidArgumentError("0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if ((exp & 1) != 0 && __builtin_mul_overflow(result, b, &result)) return overflow_error();
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(b, b, &b)) return overflow_error();
  }
  return Value::integer(result);
}

// Python slice index normalization (PySlice_AdjustIndices).
absl::Status slice_indices(int64_t length, const Value& start_v, const Value& stop_v,
                           const Value& step_v, std::vector<size_t>& out) {
  const auto as_index = [](const Value& v, std::optional<int64_t>& dst) -> absl::Status {
    if (v.is_none()) return absl::OkStatus();
    if (!v.is_int() && !v.is_bool()) {
      return type_error("slice indices must be integers or None");
    }
    dst = v.as_int();
    return absl::OkStatus();
  };
  std::optional<int64_t> start, stop, step;
  TESSERA_RETURN_IF_ERROR(as_index(start_v, start));
  TESSERA_RETURN_IF_ERROR(as_index(stop_v, stop));
  TESSERA_RETURN_IF_ERROR(as_index(step_v, step));
  const int64_t st = step.value_or(1);
  if (st == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  const auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= length) {
      x = st < 0 ? length - 1 : length;
    }
    return x;
  };
  const int64_t lo = adjust(start, st < 0 ? length - 1 : 0);
  const int64_t hi = adjust(stop, st < 0 ? -1 : length);
  if (st > 0) {
    for (int64_t i = lo; i < hi; i += st) out.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = lo; i > hi; i += st) out.push_back(static_cast<size_t>(i));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> binary_operator(Interpreter& in, std::string_view op, const Value& a,
                                      const Value& b) {
  // Jinja's Undefined refuses arithmetic (it is only printable, iterable and testable).
  if (a.is_undefined()) return absl::InvalidArgumentError(a.undefined_hint());
  if (b.is_undefined()) return absl::InvalidArgumentError(b.undefined_hint());
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return overflow_error();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      TESSERA_RETURN_IF_ERROR(in.check_string_size(a.as_string().size() + b.as_string().size()));
      if (a.is_markup() || b.is_markup()) {  // Markup.__add__/__radd__ escape the plain side
        return Value::markup((a.is_markup() ? a.as_string() : pystr::html_escape(a.as_string())) +
                             (b.is_markup() ? b.as_string() : pystr::html_escape(b.as_string())));
      }
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_lazy() &&
        !b.is_lazy()) {
      TESSERA_RETURN_IF_ERROR(in.check_list_size(a.items().size() + b.items().size()));
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (a.is_string()) {
      return type_error(
          absl::StrCat("can only concatenate str (not \"", type_name(b), "\") to str"));
    }
    return operand_error("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return overflow_error();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() - b.as_double());
    return operand_error("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return overflow_error();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() * b.as_double());
    const auto repeatable = [](const Value& v) {
      return v.is_string() || (v.is_list() && !v.is_lazy());
    };
    if (repeatable(a) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int(), in);
    if (repeatable(b) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int(), in);
    return operand_error("*", a, b);
  }
  if (op == "/") {
    if (!nums) return operand_error("/", a, b);
    if (b.as_double() == 0.0) return absl::InvalidArgumentError("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) {
      std::vector<Value> args = b.is_tuple() ? b.items() : std::vector<Value>{b};
      if (a.is_markup()) {  // Markup.__mod__ escapes what it interpolates
        for (Value& arg : args) {
          if (!arg.is_markup() && !arg.is_number())
            arg = Value::markup(pystr::html_escape(arg.str()));
        }
      }
      TESSERA_ASSIGN_OR_RETURN(std::string s, percent_format(a.as_string(), args));
      return a.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
    }
    if (!nums) return operand_error(op, a, b);
    if (b.as_double() == 0.0) {
      return absl::InvalidArgumentError(op == "%" ? "modulo by zero"
                                                  : "integer division or modulo by zero");
    }
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return overflow_error();
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {  // Python floors toward negative infinity
        q -= 1;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    const double x = a.as_double(), y = b.as_double();
    return Value::number(op == "//" ? py_floordiv(x, y) : py_fmod(x, y));
  }
  if (op == "**") {
    if (ints) return int_pow(a.as_int(), b.as_int());
    if (nums) {
      if (a.as_double() == 0.0 && b.as_double() < 0) {
        return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
      }
      return Value::number(std::pow(a.as_double(), b.as_double()));
    }
    return operand_error("**", a, b);
  }
  return absl::InternalError(absl::StrCat("unknown operator ", sv(op)));
}

absl::StatusOr<Value> slice_value(const Value& obj, const Value& start, const Value& stop,
                                  const Value& step) {
  if (obj.is_undefined()) return absl::InvalidArgumentError(obj.undefined_hint());
  // Jinja compiles slices to plain Python subscripts (not its forgiving getitem), so an
  // unsliceable object or a non-integer bound is an error.
  if ((!obj.is_list() && !obj.is_string()) || obj.is_lazy()) {
    return type_error(absl::StrCat("'", type_name(obj), "' object is not subscriptable"));
  }
  std::vector<size_t> idx;
  if (obj.is_list()) {
    TESSERA_RETURN_IF_ERROR(
        slice_indices(static_cast<int64_t>(obj.items().size()), start, stop, step, idx));
    std::vector<Value> out;
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(obj.items()[i]);
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  const std::string& s = obj.as_string();
  std::string out;
  if (is_ascii(s)) {
    TESSERA_RETURN_IF_ERROR(slice_indices(static_cast<int64_t>(s.size()), start, stop, step, idx));
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(s[i]);
  } else {
    const std::u32string cps = utf8_decode(s);
    TESSERA_RETURN_IF_ERROR(
        slice_indices(static_cast<int64_t>(cps.size()), start, stop, step, idx));
    for (size_t i : idx) utf8_append(out, cps[i]);
  }
  return Value::string(std::move(out));
}

}  // namespace tessera::jinja
