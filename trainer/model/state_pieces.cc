#include "trainer/model/state_pieces.h"

#include <algorithm>
#include <string>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "trainer/strategy/sync_plan.h"

namespace mtb {
namespace {

// One piece per parameter that flat elements [range) touch: `view` gives the
// values of flat elements [offset, offset + numel).
template <typename View>
void AppendPieces(const ParameterStore& store, const FlatRange& range,
                  const std::string& prefix, const View& view,
                  std::vector<StatePiece>* pieces) {
  const int64_t begin = range.offset;
  const int64_t end = range.offset + range.numel;
  for (int parameter : store.layout()) {
    const NamedParameter& p = store.parameters()[parameter];
    const int64_t first = store.offset(parameter);
    const int64_t last = first + p.tensor.numel();
    const int64_t from = std::max(begin, first);
    const int64_t to = std::min(end, last);
    if (from >= to) continue;
    StatePiece piece;
    piece.name = absl::StrCat(prefix, p.name);
    piece.global_shape.assign(p.tensor.sizes().begin(), p.tensor.sizes().end());
    piece.offset = from - first;
    piece.values = view(from, to - from);
    pieces->push_back(std::move(piece));
  }
}

}  // namespace

std::vector<StatePiece> ModelPieces(const ParameterStore& store,
                                    const std::vector<FlatRange>& ranges) {
  std::vector<StatePiece> pieces;
  const at::Tensor& flat = store.flat_parameters();
  for (const FlatRange& range : ranges) {
    AppendPieces(store, range, "model/",
                 [&](int64_t offset, int64_t numel) {
                   return flat.narrow(0, offset, numel);
                 },
                 &pieces);
  }
  return pieces;
}

std::vector<StatePiece> ModelPiecesOf(const ParameterStore& store,
                                      const std::vector<FlatRange>& ranges,
                                      const std::vector<at::Tensor>& values) {
  CHECK_EQ(values.size(), ranges.size());
  std::vector<StatePiece> pieces;
  for (size_t i = 0; i < ranges.size(); ++i) {
    CHECK_EQ(values[i].numel(), ranges[i].numel) << "range " << i;
    const at::Tensor flat = values[i].view({-1});
    const int64_t first = ranges[i].offset;
    AppendPieces(store, ranges[i], "model/",
                 [&](int64_t offset, int64_t numel) {
                   return flat.narrow(0, offset - first, numel);
                 },
                 &pieces);
  }
  return pieces;
}

std::vector<StatePiece> OptimizerPieces(const ParameterStore& store,
                                        const FlatAdamW& optimizer,
                                        const std::vector<FlatRange>& ranges) {
  std::vector<StatePiece> pieces;
  for (const FlatRange& range : ranges) {
    AppendPieces(store, range, "optimizer/exp_avg/",
                 [&](int64_t offset, int64_t numel) {
                   return optimizer.exp_avg_of(offset, numel);
                 },
                 &pieces);
    AppendPieces(store, range, "optimizer/exp_avg_sq/",
                 [&](int64_t offset, int64_t numel) {
                   return optimizer.exp_avg_sq_of(offset, numel);
                 },
                 &pieces);
  }
  return pieces;
}

StatePiece OptimizerStepPiece(FlatAdamW& optimizer) {
  StatePiece piece;
  piece.name = "optimizer/step";
  piece.values = optimizer.step_count();
  return piece;
}

// The device-independent plan's split (the CUDA trainer shards by it too),
// so both sides cut every tensor identically.
std::vector<int64_t> EvenCounts(int64_t numel, int n) {
  return ShardCounts(numel, n);
}

FlatRange EvenSlice(int64_t numel, int n, int rank) {
  CHECK(rank >= 0 && rank < n) << rank << " of " << n;
  const std::vector<int64_t> counts = EvenCounts(numel, n);
  FlatRange slice;
  for (int p = 0; p < rank; ++p) slice.offset += counts[p];
  slice.numel = counts[rank];
  return slice;
}

}  // namespace mtb
