#include "common/results/json_io.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/results/atomic_file.h"
#include "common/base/status.h"
#include "google/protobuf/util/json_util.h"

namespace mtb {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json,
                                                            options);
  // Serialising a valid in-memory message cannot fail except for invalid
  // UTF-8 in a string field, which is our bug.
  if (!status.ok()) {
    return absl::StrCat("{\"error\": \"could not serialise ",
                        message.GetTypeName(), "\"}\n");
  }
  return json;
}

namespace {

absl::Status ParseJson(absl::string_view json, bool ignore_unknown_fields,
                       google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = ignore_unknown_fields;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message,
      options);
  if (!status.ok()) {
    // protobuf's parser quotes the input around the error over several
    // lines; an error is one line.
    std::string reason = status.message().as_string();
    absl::StrReplaceAll({{"\n", " "}}, &reason);
    absl::RemoveExtraAsciiWhitespace(&reason);
    return absl::DataLossError(absl::StrCat(
        "not a valid ", message->GetTypeName(), " JSON: ", reason));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FromJson(absl::string_view json,
                      google::protobuf::Message* message) {
  return ParseJson(json, /*ignore_unknown_fields=*/false, message);
}

absl::Status FromJsonIgnoringUnknownFields(absl::string_view json,
                                           google::protobuf::Message* message) {
  return ParseJson(json, /*ignore_unknown_fields=*/true, message);
}

absl::Status WriteJsonFile(const google::protobuf::Message& message,
                           const std::string& path) {
  return WriteFileAtomically(path, ToJson(message));
}

absl::Status ReadJsonFile(const std::string& path,
                          google::protobuf::Message* message) {
  ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  return Annotate(FromJson(contents, message), path);
}

}  // namespace mtb
