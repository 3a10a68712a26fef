#include "common/hf/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "google/protobuf/struct.pb.h"

namespace mtb::hf {
namespace {

constexpr char kMetadata[] = "__metadata__";
constexpr uint64_t kAlignment = 8;

// A JSON string literal (names and metadata are ours, but quote them
// properly anyway).
std::string Quote(absl::string_view text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      quoted.push_back('\\');
      quoted.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      quoted += absl::StrFormat("\\u%04x", c);
    } else {
      quoted.push_back(static_cast<char>(c));
    }
  }
  return quoted + "\"";
}

uint64_t Elements(const std::vector<int64_t>& shape) {
  uint64_t elements = 1;
  for (int64_t dimension : shape) elements *= static_cast<uint64_t>(dimension);
  return elements;
}

// A JSON number that must be a non-negative integer (offsets, dimensions).
bool AsCount(const google::protobuf::Value& value, uint64_t* count) {
  if (value.kind_case() != google::protobuf::Value::kNumberValue) return false;
  const double number = value.number_value();
  // Doubles hold integers exactly up to 2^53: far beyond any file here.
  if (number < 0 || number > 9007199254740992.0 ||
      number != static_cast<double>(static_cast<uint64_t>(number))) {
    return false;
  }
  *count = static_cast<uint64_t>(number);
  return true;
}

}  // namespace

int DtypeBytes(absl::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

const SafetensorsFile::Entry* SafetensorsFile::Find(absl::string_view name) const {
  for (const Entry& entry : tensors) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

absl::StatusOr<std::string> EncodeSafetensors(const std::vector<SafetensorsTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> fields;
  if (!metadata.empty()) {
    std::vector<std::string> items;
    for (const auto& [key, value] : metadata) items.push_back(Quote(key) + ":" + Quote(value));
    fields.push_back(absl::StrCat(Quote(kMetadata), ":{", absl::StrJoin(items, ","), "}"));
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsTensor& tensor : tensors) {
    const int bytes = DtypeBytes(tensor.dtype);
    if (bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(tensor.name, ": unknown safetensors dtype '", tensor.dtype, "'"));
    }
    if (!names.insert(tensor.name).second || tensor.name == kMetadata) {
      return absl::InvalidArgumentError(absl::StrCat(tensor.name, ": the name repeats"));
    }
    if (Elements(tensor.shape) * bytes != tensor.data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(tensor.name, ": ", tensor.data.size(), " bytes, but shape [",
                       absl::StrJoin(tensor.shape, ","), "] of ", tensor.dtype, " needs ",
                       Elements(tensor.shape) * bytes));
    }
    fields.push_back(absl::StrCat(Quote(tensor.name), ":{\"dtype\":", Quote(tensor.dtype),
                                  ",\"shape\":[", absl::StrJoin(tensor.shape, ","),
                                  "],\"data_offsets\":[", offset, ",", offset + tensor.data.size(),
                                  "]}"));
    offset += tensor.data.size();
  }
  std::string header = absl::StrCat("{", absl::StrJoin(fields, ","), "}");
  // Spaces after the object (JSON whitespace) put the data 8-byte aligned.
  header.append((kAlignment - (8 + header.size()) % kAlignment) % kAlignment, ' ');
  std::string file(8, '\0');
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  file.reserve(8 + header.size() + offset);
  file += header;
  for (const SafetensorsTensor& tensor : tensors) file += tensor.data;
  return file;
}

absl::StatusOr<SafetensorsFile> DecodeSafetensors(std::string bytes, const std::string& path) {
  auto corrupt = [&path](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid safetensors file: ", why));
  };
  if (bytes.size() < 8) return corrupt(absl::StrCat(bytes.size(), " bytes, shorter than 8"));
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  if (length > bytes.size() - 8) {
    return corrupt(absl::StrCat("the header claims ", length, " bytes but the file has ",
                                bytes.size() - 8, " after the length"));
  }
  google::protobuf::Struct header;
  if (const absl::Status parsed = FromJson(absl::string_view(bytes).substr(8, length), &header);
      !parsed.ok()) {
    return corrupt(absl::StrCat("the header is not a JSON object (", parsed.message(), ")"));
  }
  SafetensorsFile file;
  file.data_start = 8 + length;
  const uint64_t data_size = bytes.size() - file.data_start;
  for (const auto& [name, value] : header.fields()) {
    if (name == kMetadata) {
      if (value.kind_case() != google::protobuf::Value::kStructValue) {
        return corrupt("__metadata__ is not an object");
      }
      for (const auto& [key, item] : value.struct_value().fields()) {
        if (item.kind_case() != google::protobuf::Value::kStringValue) {
          return corrupt(absl::StrCat("__metadata__.", key, " is not a string"));
        }
        file.metadata[key] = item.string_value();
      }
      continue;
    }
    const auto bad = [&](absl::string_view why) { return corrupt(absl::StrCat(name, ": ", why)); };
    if (value.kind_case() != google::protobuf::Value::kStructValue) return bad("not an object");
    const auto& fields = value.struct_value().fields();
    const auto dtype = fields.find("dtype");
    const auto shape = fields.find("shape");
    const auto offsets = fields.find("data_offsets");
    if (dtype == fields.end() || shape == fields.end() || offsets == fields.end()) {
      return bad("needs dtype, shape and data_offsets");
    }
    SafetensorsFile::Entry entry;
    entry.name = name;
    entry.dtype = dtype->second.string_value();
    if (DtypeBytes(entry.dtype) == 0) return bad(absl::StrCat("unknown dtype '", entry.dtype, "'"));
    if (shape->second.kind_case() != google::protobuf::Value::kListValue) {
      return bad("shape is not a list");
    }
    for (const google::protobuf::Value& dimension : shape->second.list_value().values()) {
      uint64_t size = 0;
      if (!AsCount(dimension, &size)) return bad("a dimension is not a non-negative integer");
      entry.shape.push_back(static_cast<int64_t>(size));
    }
    if (offsets->second.kind_case() != google::protobuf::Value::kListValue ||
        offsets->second.list_value().values_size() != 2 ||
        !AsCount(offsets->second.list_value().values(0), &entry.begin) ||
        !AsCount(offsets->second.list_value().values(1), &entry.end) || entry.end < entry.begin) {
      return bad("data_offsets is not [begin, end] with begin <= end");
    }
    const uint64_t expected = Elements(entry.shape) * DtypeBytes(entry.dtype);
    if (entry.end - entry.begin != expected) {
      return bad(absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] hold ",
                              entry.end - entry.begin, " bytes, but shape [",
                              absl::StrJoin(entry.shape, ","), "] of ", entry.dtype, " needs ",
                              expected));
    }
    file.tensors.push_back(std::move(entry));
  }
  std::sort(file.tensors.begin(), file.tensors.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  // The tensors must tile the data: no holes, no overlaps, nothing after.
  uint64_t covered = 0;
  for (const SafetensorsFile::Entry& entry : file.tensors) {
    if (entry.begin != covered) {
      return corrupt(absl::StrCat(entry.name, " starts at data offset ", entry.begin,
                                  " but the previous tensor ends at ", covered,
                                  " (a hole or an overlap)"));
    }
    covered = entry.end;
  }
  if (covered != data_size) {
    return corrupt(absl::StrCat("the tensors cover ", covered, " data bytes but the file has ",
                                data_size, " (truncated or trailing bytes)"));
  }
  file.bytes = std::move(bytes);
  return file;
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return DecodeSafetensors(std::move(bytes), path);
}

}  // namespace mtb::hf
