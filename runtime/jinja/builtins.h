// Jinja's built-in filters, tests, global functions and the Python methods templates call on
// strings, dicts and lists (`content.strip()`, `message.get('x')`), with the transformers
// additions (tojson without HTML escaping, raise_exception, strftime_now).
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/jinja/value.h"

namespace tessera::jinja {

enum class Support : uint8_t {
  kSupported,
  kUnsupported,  // a real Jinja builtin this interpreter does not implement
  kUnknown,      // not a Jinja builtin at all
};

Support filter_support(std::string_view name);
Support test_support(std::string_view name);

absl::StatusOr<Value> apply_filter(Interpreter& in, std::string_view name, const Value& input,
                                   CallArgs& args);
absl::StatusOr<bool> apply_test(Interpreter& in, std::string_view name, const Value& input,
                                CallArgs& args);

// `obj.name` for the Python methods the sandbox allows on str/dict/list: a bound callable, or
// nullopt when the object has no such method.
std::optional<Value> find_method(const Value& obj, std::string_view name);

// Python's printf-style `fmt % args` (and Jinja's |format): %s %r %d %i %f %e %g %x %o %c %%
// with flags, width and precision; named (%(key)s) conversions are unsupported.
absl::StatusOr<std::string> percent_format(std::string_view fmt, const std::vector<Value>& args);

// The environment's globals: range, namespace, dict, raise_exception, strftime_now.
DictData make_globals();

// Python-style argument binding for builtins: `params` in signature order, the first `required`
// of them mandatory. Returns one slot per parameter (nullopt where not given). Surplus
// positionals, unknown or duplicate keywords are errors naming `fn`.
absl::StatusOr<std::vector<std::optional<Value>>> bind_args(
    std::string_view fn, CallArgs& args, std::initializer_list<std::string_view> params,
    size_t required = 0);

}  // namespace tessera::jinja
