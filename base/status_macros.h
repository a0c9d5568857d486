// Early-return helpers for absl::Status / absl::StatusOr.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TESSERA_STATUS_CONCAT_INNER(a, b) a##b
#define TESSERA_STATUS_CONCAT(a, b) TESSERA_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define TESSERA_RETURN_IF_ERROR(...)                                      \
  do {                                                                    \
    if (absl::Status tessera_status_ = (__VA_ARGS__); !tessera_status_.ok()) \
      return tessera_status_;                                             \
  } while (0)

// `lhs = *expr` when `expr` (a StatusOr) is OK; returns its status otherwise.
// Variadic so that braced initializers in `expr` (whose commas the preprocessor sees) work.
#define TESSERA_ASSIGN_OR_RETURN(lhs, ...) \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_STATUS_CONCAT(tessera_statusor_, __LINE__), lhs, (__VA_ARGS__))
#define TESSERA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = *std::move(tmp)
