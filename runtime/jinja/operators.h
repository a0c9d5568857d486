// Python semantics for Jinja's binary operators (+ - * / // % **) and for slicing.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/jinja/value.h"

namespace tessera::jinja {

// `a op b`. Sizes of built strings/lists are checked against the render's limits.
absl::StatusOr<Value> binary_operator(Interpreter& in, std::string_view op, const Value& a,
                                      const Value& b);

// obj[start:stop:step] on a list, tuple or string (code points); none/undefined bounds are
// omitted ones.
absl::StatusOr<Value> slice_value(const Value& obj, const Value& start, const Value& stop,
                                  const Value& step);

}  // namespace tessera::jinja
