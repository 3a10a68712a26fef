#include "common/base/skew.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/results/atomic_file.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb {

absl::StatusOr<Skew> ParseSkew(absl::string_view flag, absl::string_view text) {
  Skew skew;
  if (text == "uniform") return skew;
  if (text == "linear") {
    skew.kind = Skew::Kind::kLinear;
    return skew;
  }
  absl::string_view exponent = text;
  if (absl::ConsumePrefix(&exponent, "zipf:")) {
    double value = 0;
    if (absl::SimpleAtod(exponent, &value) && std::isfinite(value) &&
        value >= 0) {
      skew.kind = Skew::Kind::kZipf;
      skew.exponent = value;
      return skew;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", text,
                     ": the Zipf exponent must be a finite number >= 0, e.g. "
                     "zipf:1.2"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "=", text, ": expected uniform, linear or zipf:S (S >= 0)"));
}

std::string SkewToString(const Skew& skew) {
  switch (skew.kind) {
    case Skew::Kind::kUniform:
      return "uniform";
    case Skew::Kind::kLinear:
      return "linear";
    case Skew::Kind::kZipf:
      return absl::StrCat("zipf:", skew.exponent);
  }
  return "?";
}

std::vector<double> SkewWeights(const Skew& skew, int world_size) {
  CHECK_GT(world_size, 0);
  std::vector<double> weights(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    switch (skew.kind) {
      case Skew::Kind::kUniform:
        weights[rank] = 1;
        break;
      case Skew::Kind::kLinear:
        weights[rank] = rank + 1;
        break;
      case Skew::Kind::kZipf:
        weights[rank] = 1.0 / std::pow(rank + 1.0, skew.exponent);
        break;
    }
  }
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& weight : weights) weight /= sum;
  return weights;
}

std::vector<int64_t> SplitByWeights(const std::vector<double>& weights,
                                    int64_t total) {
  CHECK(!weights.empty());
  CHECK_GE(total, 0);
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  CHECK_GT(sum, 0) << "all weights are zero";
  std::vector<int64_t> parts(weights.size());
  std::vector<double> remainders(weights.size());
  int64_t assigned = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    CHECK_GE(weights[i], 0);
    const double exact = static_cast<double>(total) * (weights[i] / sum);
    parts[i] = std::min<int64_t>(static_cast<int64_t>(std::floor(exact)), total);
    remainders[i] = exact - static_cast<double>(parts[i]);
    assigned += parts[i];
  }
  // Rounding in the shares can over-assign by a unit or two for huge totals;
  // take it back from the largest parts so the sum is exact either way.
  while (assigned > total) {
    auto largest = std::max_element(parts.begin(), parts.end());
    --*largest;
    --assigned;
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return remainders[a] > remainders[b];
  });
  for (size_t i = 0; assigned < total; i = (i + 1) % order.size()) {
    ++parts[order[i]];
    ++assigned;
  }
  return parts;
}

SplitMatrix SkewedSplitMatrix(const Skew& skew, int world_size,
                              int64_t units_per_rank) {
  const std::vector<int64_t> row =
      SplitByWeights(SkewWeights(skew, world_size), units_per_rank);
  return SplitMatrix(world_size, row);
}

absl::StatusOr<SplitMatrix> ParseSplitMatrix(absl::string_view text,
                                             int world_size,
                                             int64_t element_size,
                                             absl::string_view source) {
  CHECK_GT(world_size, 0);
  CHECK_GT(element_size, 0);
  SplitMatrix matrix;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> cells =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (cells.empty()) continue;
    const int row = static_cast<int>(matrix.size());
    if (row == world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line_number, ": more than ", world_size,
          " rows; the split matrix must be world_size x world_size (",
          world_size, " x ", world_size, ", bytes sent from row rank to "
          "column rank)"));
    }
    if (static_cast<int>(cells.size()) != world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line_number, ": row ", row, " has ", cells.size(),
          " entries, expected ", world_size, " (one per destination rank)"));
    }
    std::vector<int64_t> values;
    for (size_t column = 0; column < cells.size(); ++column) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(cells[column], &value) || value < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", line_number, ": entry [", row, "][", column, "] = '",
            cells[column], "' is not a non-negative whole number of bytes"));
      }
      if (value % element_size != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", line_number, ": entry [", row, "][", column, "] = ",
            value, " bytes is not a multiple of the element size ",
            element_size));
      }
      values.push_back(value);
    }
    matrix.push_back(std::move(values));
  }
  if (static_cast<int>(matrix.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", matrix.size(), " rows, expected ", world_size,
        " (the split matrix must be world_size x world_size)"));
  }
  return matrix;
}

absl::StatusOr<SplitMatrix> ReadSplitMatrixFile(const std::string& path,
                                                int world_size,
                                                int64_t element_size) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseSplitMatrix(text, world_size, element_size, path);
}

std::vector<int64_t> RowSums(const SplitMatrix& matrix) {
  std::vector<int64_t> sums;
  for (const auto& row : matrix) {
    sums.push_back(std::accumulate(row.begin(), row.end(), int64_t{0}));
  }
  return sums;
}

std::vector<int64_t> ColumnSums(const SplitMatrix& matrix) {
  std::vector<int64_t> sums(matrix.empty() ? 0 : matrix[0].size(), 0);
  for (const auto& row : matrix) {
    for (size_t column = 0; column < row.size(); ++column) {
      sums[column] += row[column];
    }
  }
  return sums;
}

}  // namespace mtb
