#include "common/libtorch/torch_status.h"

#include <new>
#include <stdexcept>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "c10/util/Exception.h"

namespace mtb {
namespace {

// c10d and Gloo report transport problems as plain runtime errors; these
// phrases are what they say (Gloo's pair.cc, c10d's TCPStore and socket code).
bool LooksLikeTimeout(absl::string_view message) {
  return absl::StrContains(message, "Timed out") ||
         absl::StrContains(message, "timed out") ||
         absl::StrContains(message, "Timeout") ||
         absl::StrContains(message, "timeout");
}

bool LooksLikeLostPeer(absl::string_view message) {
  return absl::StrContains(message, "Connection closed") ||
         absl::StrContains(message, "Connection reset") ||
         absl::StrContains(message, "Connection refused") ||
         absl::StrContains(message, "Broken pipe");
}

}  // namespace

absl::Status StatusFromException(absl::string_view operation,
                                 const std::exception& error) {
  std::string message;
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    message = c10_error->what_without_backtrace();
    if (dynamic_cast<const c10::ValueError*>(&error) != nullptr ||
        dynamic_cast<const c10::TypeError*>(&error) != nullptr ||
        dynamic_cast<const c10::IndexError*>(&error) != nullptr) {
      code = absl::StatusCode::kInvalidArgument;
    } else if (dynamic_cast<const c10::NotImplementedError*>(&error) !=
               nullptr) {
      code = absl::StatusCode::kUnimplemented;
    } else if (dynamic_cast<const c10::OutOfMemoryError*>(&error) !=
                   nullptr ||
               absl::StrContains(message, "can't allocate memory")) {
      // LibTorch 1.13's CPU allocator throws a plain c10::Error for a
      // failed allocation ("DefaultCPUAllocator: can't allocate memory").
      code = absl::StatusCode::kResourceExhausted;
    }
  } else {
    message = error.what();
    if (dynamic_cast<const std::invalid_argument*>(&error) != nullptr) {
      code = absl::StatusCode::kInvalidArgument;
    } else if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) {
      code = absl::StatusCode::kResourceExhausted;
    }
  }
  if (code == absl::StatusCode::kInternal) {
    if (LooksLikeTimeout(message)) {
      code = absl::StatusCode::kDeadlineExceeded;
    } else if (LooksLikeLostPeer(message)) {
      code = absl::StatusCode::kUnavailable;
    }
  }
  // c10 messages often end with a newline; a Status is one line.
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  if (code == absl::StatusCode::kResourceExhausted) {
    // Drop c10's "[enforce fail at alloc_cpu.cpp:75] err == 0. " preamble.
    if (const size_t allocator = message.find("DefaultCPUAllocator");
        allocator != std::string::npos) {
      message = message.substr(allocator);
    }
    return absl::Status(code,
                        absl::StrCat(operation, ": out of memory: ", message));
  }
  return absl::Status(code, absl::StrCat(operation, ": ", message));
}

absl::Status StatusFromUnknownException(absl::string_view operation) {
  return absl::InternalError(
      absl::StrCat(operation, ": unknown exception (not a std::exception)"));
}

}  // namespace mtb
