#include "common/base/status.h"

#include "absl/strings/str_cat.h"

namespace mtb {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(),
                         absl::StrCat(context, ": ", status.message()));
  // Payloads (e.g. MarkDeterministic's) describe the failure, not the text.
  status.ForEachPayload(
      [&annotated](absl::string_view type_url, const absl::Cord& payload) {
        annotated.SetPayload(type_url, payload);
      });
  return annotated;
}

}  // namespace mtb
