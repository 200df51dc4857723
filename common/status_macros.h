#pragma once

// Debian's Abseil (20220623) has no status_macros.h: Baton's own, used everywhere.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BATON_STATUS_CONCAT_INNER_(a, b) a##b
#define BATON_STATUS_CONCAT_(a, b) BATON_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status _baton_status = (expr);       \
    if (!_baton_status.ok()) return _baton_status; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` returns the error of a failed StatusOr, else
// moves its value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  BATON_ASSIGN_OR_RETURN_IMPL_(BATON_STATUS_CONCAT_(_baton_statusor_, __LINE__), lhs, rexpr)

#define BATON_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
