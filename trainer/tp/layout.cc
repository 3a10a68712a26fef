#include "trainer/tp/layout.h"

#include <algorithm>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::tp {
namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  return numel;
}

// A local part as segments of `length` elements, each contiguous in the
// global tensor: segment k starts at global element first + k * stride.
struct Segments {
  int64_t count = 1;
  int64_t length = 0;
  int64_t first = 0;
  int64_t stride = 0;
};

Segments SegmentsOf(Split split, const std::vector<int64_t>& global_shape,
                    int rank, int n) {
  const int64_t global = Numel(global_shape);
  const int64_t local = global / n;
  switch (split) {
    case Split::kReplicated:
      return {1, global, 0, 0};
    case Split::kRows:
      return {1, local, rank * local, 0};
    case Split::kQkvRows:
      return {3, local / 3, rank * (local / 3), global / 3};
    case Split::kColumns: {
      const int64_t columns = global_shape.back() / n;
      return {global / global_shape.back(), columns, rank * columns,
              global_shape.back()};
    }
  }
  return {};
}

}  // namespace

Split SplitOf(const std::string& name) {
  if (name == "wte") return Split::kRows;
  if (absl::EndsWith(name, ".attn.c_attn.weight") ||
      absl::EndsWith(name, ".attn.c_attn.bias")) {
    return Split::kQkvRows;
  }
  if (absl::EndsWith(name, ".mlp.c_fc.weight") ||
      absl::EndsWith(name, ".mlp.c_fc.bias")) {
    return Split::kRows;
  }
  if (absl::EndsWith(name, ".attn.c_proj.weight") ||
      absl::EndsWith(name, ".mlp.c_proj.weight")) {
    return Split::kColumns;
  }
  return Split::kReplicated;
}

std::vector<int64_t> LocalShape(Split split,
                                const std::vector<int64_t>& global_shape,
                                int n) {
  std::vector<int64_t> shape = global_shape;
  switch (split) {
    case Split::kReplicated:
      break;
    case Split::kRows:
    case Split::kQkvRows:
      shape[0] /= n;
      break;
    case Split::kColumns:
      shape.back() /= n;
      break;
  }
  return shape;
}

at::Tensor LocalPart(Split split, const at::Tensor& global, int rank, int n) {
  switch (split) {
    case Split::kReplicated:
      return global.clone();
    case Split::kRows: {
      const int64_t rows = global.size(0) / n;
      return global.narrow(0, rank * rows, rows).contiguous();
    }
    case Split::kQkvRows: {
      const int64_t width = global.size(0) / 3;
      const int64_t rows = width / n;
      std::vector<at::Tensor> parts;
      for (int64_t part = 0; part < 3; ++part) {  // queries, keys, values
        parts.push_back(global.narrow(0, part * width + rank * rows, rows));
      }
      return at::cat(parts).contiguous();
    }
    case Split::kColumns: {
      const int64_t columns = global.size(-1) / n;
      return global.narrow(-1, rank * columns, columns).contiguous();
    }
  }
  return at::Tensor();
}

std::vector<GlobalRun> GlobalRuns(Split split,
                                  const std::vector<int64_t>& global_shape,
                                  int rank, int n, int64_t offset,
                                  int64_t numel) {
  const Segments segments = SegmentsOf(split, global_shape, rank, n);
  CHECK_GE(offset, 0);
  CHECK_LE(offset + numel, segments.count * segments.length);
  std::vector<GlobalRun> runs;
  const int64_t end = offset + numel;
  for (int64_t at = offset; at < end;) {
    const int64_t segment = at / segments.length;
    const int64_t within = at % segments.length;
    const int64_t take = std::min(segments.length - within, end - at);
    runs.push_back({at, segments.first + segment * segments.stride + within,
                    take});
    at += take;
  }
  return runs;
}

absl::StatusOr<at::Tensor> GatherGlobal(Split split, const at::Tensor& local,
                                        collective::Communicator& comm) {
  const int n = comm.world_size();
  const at::Tensor mine = local.detach().contiguous();
  if (split == Split::kReplicated) return mine.clone();
  std::vector<int64_t> gathered_shape = {n};
  for (int64_t size : mine.sizes()) gathered_shape.push_back(size);
  const at::Tensor all = at::empty(gathered_shape, mine.options());
  RETURN_IF_ERROR(comm.AllGather(mine, all));
  switch (split) {
    case Split::kReplicated:
    case Split::kRows: {
      std::vector<int64_t> shape = mine.sizes().vec();
      shape[0] *= n;
      return all.reshape(shape);
    }
    case Split::kQkvRows: {
      // (n, 3, rows, ...) -> (3, n, rows, ...).
      std::vector<int64_t> view = {n, 3, mine.size(0) / 3};
      for (int64_t d = 1; d < mine.dim(); ++d) view.push_back(mine.size(d));
      std::vector<int64_t> shape = mine.sizes().vec();
      shape[0] *= n;
      return all.reshape(view).transpose(0, 1).contiguous().reshape(shape);
    }
    case Split::kColumns: {
      // (n, R, C/n) -> (R, n, C/n).
      std::vector<int64_t> shape = mine.sizes().vec();
      shape.back() *= n;
      return all.movedim(0, -2).contiguous().reshape(shape);
    }
  }
  return absl::InternalError("unknown split");
}

}  // namespace mtb::tp
