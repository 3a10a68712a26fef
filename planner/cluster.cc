#include "planner/cluster.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/results/json_io.h"

namespace mtb::planner {
namespace {

absl::Status CheckSourced(const Sourced& value, bool present, const std::string& where,
                          const std::string& field) {
  if (!present) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field,
                     " is missing (give {\"value\": ..., \"source\": "
                     "\"measured: FILE @ COMMIT\" or \"stated: ...\"})"));
  }
  if (!(value.value() > 0) || !std::isfinite(value.value())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field, ".value is ", value.value(), ": must be positive"));
  }
  if (value.source().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field,
                     ".source is empty: every number says where it "
                     "came from (\"measured: FILE @ COMMIT\" or \"stated: ...\")"));
  }
  return absl::OkStatus();
}

absl::Status CheckRate(const ComputeRate& rate, const std::string& where,
                       const std::string& field) {
  if (rate.precision() != "fp32" && rate.precision() != "bf16") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", field, ".precision is \"",
                                                   rate.precision(), "\": use fp32 or bf16"));
  }
  if (rate.d_model() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field, ".d_model is ", rate.d_model(), ": must be >= 0"));
  }
  return CheckSourced(rate.flops_per_second(), rate.has_flops_per_second(), where,
                      absl::StrCat(field, ".flops_per_second"));
}

}  // namespace

absl::Status ValidateCluster(const Cluster& cluster, const std::string& where) {
  if (cluster.schema_version() != kClusterSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": schema_version is ", cluster.schema_version(),
                     ": this planner reads version ", kClusterSchemaVersion));
  }
  RETURN_IF_ERROR(CheckSourced(cluster.nodes(), cluster.has_nodes(), where, "nodes"));
  RETURN_IF_ERROR(CheckSourced(cluster.devices_per_node(), cluster.has_devices_per_node(), where,
                               "devices_per_node"));
  RETURN_IF_ERROR(CheckSourced(cluster.device_memory_bytes(), cluster.has_device_memory_bytes(),
                               where, "device_memory_bytes"));
  RETURN_IF_ERROR(CheckSourced(cluster.memory_bandwidth_gbps(), cluster.has_memory_bandwidth_gbps(),
                               where, "memory_bandwidth_gbps"));
  if (cluster.compute_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": compute is missing: give at least one {precision, d_model, "
                     "flops_per_second} row"));
  }
  for (int i = 0; i < cluster.compute_size(); ++i) {
    RETURN_IF_ERROR(CheckRate(cluster.compute(i), where, absl::StrCat("compute[", i, "]")));
  }
  for (int i = 0; i < cluster.peak_size(); ++i) {
    RETURN_IF_ERROR(CheckRate(cluster.peak(i), where, absl::StrCat("peak[", i, "]")));
  }
  for (int i = 0; i < cluster.collectives_size(); ++i) {
    const CollectiveFit& fit = cluster.collectives(i);
    const std::string field = absl::StrCat("collectives[", i, "]");
    if (fit.collective() != "all_reduce" && fit.collective() != "all_gather" &&
        fit.collective() != "reduce_scatter" && fit.collective() != "send_recv") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", field, ".collective is \"", fit.collective(),
                       "\": use all_reduce, all_gather, reduce_scatter or send_recv"));
    }
    if (fit.scope() != "intra" && fit.scope() != "inter") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", field, ".scope is \"", fit.scope(), "\": use intra or inter"));
    }
    if (fit.max_bytes() != 0 && fit.max_bytes() < fit.min_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", field, ".max_bytes ",
                                                     fit.max_bytes(), " is below min_bytes ",
                                                     fit.min_bytes()));
    }
    if (!fit.has_latency_us() || fit.latency_us().value() < 0 ||
        fit.latency_us().source().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", field,
                       ".latency_us is missing, negative or without a "
                       "source"));
    }
    RETURN_IF_ERROR(CheckSourced(fit.bandwidth_gbps(), fit.has_bandwidth_gbps(), where,
                                 absl::StrCat(field, ".bandwidth_gbps")));
  }
  return absl::OkStatus();
}

absl::StatusOr<Cluster> ReadClusterFile(const std::string& path) {
  Cluster cluster;
  if (absl::Status read = ReadJsonFile(path, &cluster); !read.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--cluster=", path, ": ", read.message()));
  }
  RETURN_IF_ERROR(ValidateCluster(cluster, absl::StrCat("--cluster=", path)));
  return cluster;
}

int TotalDevices(const Cluster& cluster) {
  return static_cast<int>(cluster.nodes().value()) *
         static_cast<int>(cluster.devices_per_node().value());
}

namespace {

double LogDistance(int measured, int wanted) {
  // A row that does not say loses to any that does.
  if (measured <= 0 || wanted <= 0) return 1e9;
  return std::abs(std::log(static_cast<double>(measured) / wanted));
}

absl::StatusOr<double> NearestRate(const google::protobuf::RepeatedPtrField<ComputeRate>& rates,
                                   const std::string& precision, int d_model, int ranks_per_node,
                                   const std::string& what, int* measured_ranks_per_node) {
  const ComputeRate* best = nullptr;
  std::pair<double, double> best_distance;
  for (const ComputeRate& rate : rates) {
    if (rate.precision() != precision) continue;
    const std::pair<double, double> distance = {LogDistance(rate.d_model(), d_model),
                                                LogDistance(rate.ranks_per_node(), ranks_per_node)};
    if (best == nullptr || distance < best_distance) {
      best = &rate;
      best_distance = distance;
    }
  }
  if (best == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the cluster file has no ", what,
                                                   " row for precision ", precision,
                                                   " (add one, or plan another --precision)"));
  }
  if (measured_ranks_per_node != nullptr) {
    *measured_ranks_per_node = std::max(1, best->ranks_per_node());
  }
  return best->flops_per_second().value();
}

}  // namespace

absl::StatusOr<double> FlopsRate(const Cluster& cluster, const std::string& precision, int d_model,
                                 int ranks_per_node, int* measured_ranks_per_node) {
  return NearestRate(cluster.compute(), precision, d_model, ranks_per_node, "compute",
                     measured_ranks_per_node);
}

absl::StatusOr<double> PeakFlopsRate(const Cluster& cluster, const std::string& precision) {
  if (cluster.peak_size() == 0) return FlopsRate(cluster, precision, 0);
  return NearestRate(cluster.peak(), precision, 0, 0, "peak", nullptr);
}

absl::StatusOr<LinkCost> LinkFor(const Cluster& cluster, Collective op, const std::string& scope,
                                 int64_t bytes, int world_size) {
  const std::string name = CollectiveName(op);
  for (bool same_collective : {true, false}) {
    const CollectiveFit* best = nullptr;
    double best_distance = std::numeric_limits<double>::infinity();
    for (const CollectiveFit& fit : cluster.collectives()) {
      if (fit.scope() != scope) continue;
      if (same_collective && fit.collective() != name) continue;
      const double lo = static_cast<double>(std::max<int64_t>(1, fit.min_bytes()));
      const double hi = fit.max_bytes() == 0 ? std::numeric_limits<double>::infinity()
                                             : static_cast<double>(fit.max_bytes());
      const double s = static_cast<double>(std::max<int64_t>(1, bytes));
      const double distance =
          (s < lo ? std::log(lo / s) : (s > hi ? std::log(s / hi) : 0.0)) +
          (fit.world_size() > 0 && world_size > 0
               ? std::abs(std::log(static_cast<double>(fit.world_size()) / world_size))
               : 0.0);
      if (best == nullptr || distance < best_distance) {
        best = &fit;
        best_distance = distance;
      }
    }
    if (best != nullptr) {
      return LinkCost{best->latency_us().value() * 1e-6, best->bandwidth_gbps().value() * 1e9};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the cluster file has no collective fit with scope ", scope,
                   " (collectives[].scope) but the layout needs ", name, " across ",
                   scope == "inter" ? "nodes" : "one node's devices"));
}

}  // namespace mtb::planner
