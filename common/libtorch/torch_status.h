// LibTorch, c10d and Gloo report failures by throwing. Every call into them
// from code that returns a Status goes through CallGuarded(), which turns the
// exception into a Status whose message starts with the operation.
#ifndef MTB_COMMON_LIBTORCH_TORCH_STATUS_H_
#define MTB_COMMON_LIBTORCH_TORCH_STATUS_H_

#include <exception>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

// Converts an exception thrown by LibTorch, c10d, Gloo or the standard library
// into a Status. The message is "<operation>: <what>" (for c10::Error without
// its C++ backtrace). Codes: invalid_argument/c10 value, type, index errors ->
// kInvalidArgument; bad_alloc or a failed LibTorch allocation ->
// kResourceExhausted ("<operation>: out of memory: <what>"); a transport timeout ->
// kDeadlineExceeded; a closed or reset connection -> kUnavailable;
// c10 NotImplementedError -> kUnimplemented; anything else -> kInternal.
absl::Status StatusFromException(absl::string_view operation,
                                 const std::exception& error);

// Same, for an exception that is not a std::exception.
absl::Status StatusFromUnknownException(absl::string_view operation);

template <typename T>
struct IsStatusOr : std::false_type {};
template <typename T>
struct IsStatusOr<absl::StatusOr<T>> : std::true_type {};

// Runs `fn` and converts anything it throws with StatusFromException.
// `fn` returns void, absl::Status or absl::StatusOr<T>; CallGuarded returns
// absl::Status for the first two and absl::StatusOr<T> for the last, or the
// plain value type R wrapped as absl::StatusOr<R> otherwise.
template <typename Fn>
auto CallGuarded(absl::string_view operation, Fn&& fn) {
  using Result = std::invoke_result_t<Fn>;
  if constexpr (std::is_void_v<Result>) {
    try {
      std::forward<Fn>(fn)();
      return absl::OkStatus();
    } catch (const std::exception& error) {
      return StatusFromException(operation, error);
    } catch (...) {
      return StatusFromUnknownException(operation);
    }
  } else if constexpr (std::is_same_v<Result, absl::Status>) {
    try {
      return std::forward<Fn>(fn)();
    } catch (const std::exception& error) {
      return StatusFromException(operation, error);
    } catch (...) {
      return StatusFromUnknownException(operation);
    }
  } else {
    using Value = std::conditional_t<IsStatusOr<Result>::value, Result,
                                     absl::StatusOr<Result>>;
    try {
      return Value(std::forward<Fn>(fn)());
    } catch (const std::exception& error) {
      return Value(StatusFromException(operation, error));
    } catch (...) {
      return Value(StatusFromUnknownException(operation));
    }
  }
}

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_TORCH_STATUS_H_
