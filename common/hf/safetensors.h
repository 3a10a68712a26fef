// The safetensors file format (Hugging Face's), read and written as bytes.
//
//   8 bytes    N, the header's length, unsigned little-endian
//   N bytes    a JSON object: for each tensor name
//              {"dtype": "F32", "shape": [3, 4], "data_offsets": [begin, end]},
//              plus an optional "__metadata__": {string: string}; padded with
//              spaces so that the data starts 8-byte aligned
//   the rest   the tensors' little-endian bytes, back to back; data_offsets
//              are relative to the data's start and must tile it exactly
//
// Torch-free: tensors are (dtype name, shape, bytes). The writer is
// deterministic (tensors in the order given, one fixed JSON spelling), so
// equal inputs give equal files byte for byte. docs/checkpoint.md, "Export".
#ifndef MTB_COMMON_HF_SAFETENSORS_H_
#define MTB_COMMON_HF_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::hf {

// One tensor to write. `dtype` is a safetensors name ("F32", "BF16", "F16",
// ...); `data` holds numel(shape) * DtypeBytes(dtype) bytes.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};

// A file read back: the tensors in data order (views into `bytes`).
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // data_offsets, relative to data_start
    uint64_t end = 0;
  };
  std::vector<Entry> tensors;
  std::string bytes;  // the whole file
  uint64_t data_start = 0;

  // The bytes of `entry`.
  absl::string_view Data(const Entry& entry) const {
    return absl::string_view(bytes).substr(data_start + entry.begin, entry.end - entry.begin);
  }
  // The entry named `name`, or nullptr.
  const Entry* Find(absl::string_view name) const;
};

// Bytes per element of a safetensors dtype name; 0 when unknown.
int DtypeBytes(absl::string_view dtype);

// The whole file. kInvalidArgument when a tensor's data size does not match
// its dtype and shape, or a name repeats.
absl::StatusOr<std::string> EncodeSafetensors(const std::vector<SafetensorsTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata);

// Parses and validates `bytes` (a file's content; `path` only names it in
// errors). kDataLoss naming the path and what is wrong: truncated, a header
// that is not a JSON object or overruns the file, an unknown dtype, a
// negative dimension, offsets that do not match the shape or leave holes or
// overlaps in the data.
absl::StatusOr<SafetensorsFile> DecodeSafetensors(std::string bytes, const std::string& path);

// ReadFile + DecodeSafetensors; kNotFound when `path` cannot be read.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

}  // namespace mtb::hf

#endif  // MTB_COMMON_HF_SAFETENSORS_H_
