// Uneven all-to-all traffic: how much each rank sends to each other rank.
// comm_bench's all_to_allv takes it from --imbalance or --split_matrix; moe_comm
// will use the same weights for routing skew.
//
// Vocabulary: a *split matrix* M has one row per source rank and one column
// per destination rank; M[src][dst] is what src sends to dst, in *units*
// (elements or bytes, the caller says which). A *skew* names the destination
// weights every source uses, so with a skew every row sums to the same
// per-rank total while receivers are loaded unevenly:
//   uniform   w[d] = 1
//   linear    w[d] = d + 1          (rank n-1 receives n times rank 0's share)
//   zipf:S    w[d] = 1 / (d + 1)^S  (rank 0 is the "hot" receiver; S = 0 is
//                                    uniform)
// Everything here is deterministic: the same arguments give the same matrix
// on every rank, so ranks can compute it independently.
#ifndef MTB_COMMON_BASE_SKEW_H_
#define MTB_COMMON_BASE_SKEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

struct Skew {
  enum class Kind { kUniform, kLinear, kZipf };
  Kind kind = Kind::kUniform;
  double exponent = 0;  // zipf only, >= 0
};

// Parses "uniform", "linear" or "zipf:S" (S a finite number >= 0).
// kInvalidArgument naming `flag` otherwise.
absl::StatusOr<Skew> ParseSkew(absl::string_view flag, absl::string_view text);

// The canonical spelling ParseSkew accepts: "uniform", "linear", "zipf:1.2".
std::string SkewToString(const Skew& skew);

// The destination weights for `world_size` ranks, normalised to sum to 1.
std::vector<double> SkewWeights(const Skew& skew, int world_size);

// Splits `total` units into parts proportional to `weights` (non-negative, not
// all zero): each part gets the floor of its exact share and the leftover units
// go one each to the parts with the largest fractional remainders, lower index
// first on ties. The parts always sum to `total`.
std::vector<int64_t> SplitByWeights(const std::vector<double>& weights,
                                    int64_t total);

// [src][dst] units; see the file comment.
using SplitMatrix = std::vector<std::vector<int64_t>>;

// Every row is SplitByWeights(SkewWeights(skew, world_size), units_per_rank).
SplitMatrix SkewedSplitMatrix(const Skew& skew, int world_size,
                              int64_t units_per_rank);

// Parses a split matrix in bytes: `world_size` lines of `world_size`
// whitespace-separated non-negative integers; '#' starts a comment. Errors are
// kInvalidArgument naming `source`, the line and column: wrong number of rows
// or columns, a negative or non-integer entry, or an entry that is not a
// multiple of `element_size`.
absl::StatusOr<SplitMatrix> ParseSplitMatrix(absl::string_view text,
                                             int world_size,
                                             int64_t element_size,
                                             absl::string_view source);

// ReadFileToString + ParseSplitMatrix (kNotFound when the file is missing).
absl::StatusOr<SplitMatrix> ReadSplitMatrixFile(const std::string& path,
                                                int world_size,
                                                int64_t element_size);

// What each rank sends (row sums) and receives (column sums).
std::vector<int64_t> RowSums(const SplitMatrix& matrix);
std::vector<int64_t> ColumnSums(const SplitMatrix& matrix);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_SKEW_H_
