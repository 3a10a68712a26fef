// Result files as JSON through protobuf's JSON mapping (never hand-written
// JSON), so every reader parses them back through the same .proto.
#ifndef MTB_COMMON_RESULTS_JSON_IO_H_
#define MTB_COMMON_RESULTS_JSON_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace mtb {

// JSON with the .proto's own field names (preserve_proto_field_names), default
// values printed, indented. int64 fields are strings, as the mapping says.
std::string ToJson(const google::protobuf::Message& message);

// Parses JSON into `message`. Unknown fields are an error: a file this build
// does not understand is reported, not half-read. kDataLoss on bad JSON.
absl::Status FromJson(absl::string_view json, google::protobuf::Message* message);

// Same, but fields `message` does not have are skipped: for reading the
// part of a file every result shares (e.g. its run_context) before knowing
// which result it is. Never for reading a result itself.
absl::Status FromJsonIgnoringUnknownFields(absl::string_view json,
                                           google::protobuf::Message* message);

// ToJson + WriteFileAtomically.
absl::Status WriteJsonFile(const google::protobuf::Message& message,
                           const std::string& path);

// ReadFileToString + FromJson; errors name the path.
absl::Status ReadJsonFile(const std::string& path,
                          google::protobuf::Message* message);

}  // namespace mtb

#endif  // MTB_COMMON_RESULTS_JSON_IO_H_
