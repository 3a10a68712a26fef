// Status plumbing shared by every tool.
//
// Our Abseil (20220623) has no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so they are
// defined here, once. Exceptions from LibTorch/c10d become a Status through
// common/libtorch/torch_status.h.
#ifndef MTB_COMMON_BASE_STATUS_H_
#define MTB_COMMON_BASE_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    ::absl::Status mtb_status_ = (expr);                        \
    if (!mtb_status_.ok()) return mtb_status_;                  \
  } while (0)

#define MTB_STATUS_CONCAT_INNER_(a, b) a##b
#define MTB_STATUS_CONCAT_(a, b) MTB_STATUS_CONCAT_INNER_(a, b)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>); on error
// returns its status, otherwise assigns (moves) the value to `lhs`, which may be
// a declaration: ASSIGN_OR_RETURN(auto file, OpenFile(path));
#define ASSIGN_OR_RETURN(lhs, expr)                                         \
  MTB_ASSIGN_OR_RETURN_IMPL_(MTB_STATUS_CONCAT_(mtb_statusor_, __LINE__), \
                             lhs, expr)
#define MTB_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace mtb {

// Prefixes a non-OK status's message with `context` ("<context>: <message>"),
// keeping its code. OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_STATUS_H_
