#include "common/collective/mesh.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace mtb::collective {
namespace {

// This rank's communicator of the group `name`: `ranks` ranks, this one at
// `rank`.
absl::StatusOr<std::unique_ptr<Communicator>> MakeGroup(
    Communicator* world, const MeshOptions& options, const std::string& name,
    int rank, int ranks) {
  CommunicatorOptions communicator = options.communicator;
  communicator.rank = rank;
  communicator.world_size = ranks;
  communicator.timeout = world->timeout();
  absl::StatusOr<std::unique_ptr<Communicator>> group = Communicator::Create(
      world->store().WithPrefix(absl::StrCat("mesh/", name)), communicator);
  if (!group.ok()) {
    return Annotate(group.status(),
                    absl::StrCat("mesh group ", name, " (rank ", rank, " of ",
                                 ranks, ")"));
  }
  FlightIdentity identity = options.identity;
  identity.rank = rank;
  identity.world_size = ranks;
  identity.group = name;
  (*group)->flight_recorder().SetIdentity(identity);
  if (!options.flight_recorder_dir.empty()) {
    (*group)->EnableFlightRecorderDumps(
        absl::StrCat(options.flight_recorder_dir, "/", name, "/",
                     FlightDumpFileName(identity)));
  }
  return group;
}

}  // namespace

MeshCoordinates MeshCoordinatesOf(int world_rank, int tp) {
  return {world_rank / tp, world_rank % tp};
}

int MeshWorldRank(const MeshCoordinates& at, int tp) {
  return at.dp * tp + at.tp;
}

absl::Status ValidateMeshShape(int world_size, int tp) {
  if (tp < 1 || world_size < 1 || world_size % tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp=", tp, " must be at least 1 and divide the world "
                     "size ", world_size,
                     " (world = dp x tp, tp ranks innermost)"));
  }
  return absl::OkStatus();
}

std::string RankMesh::tp_group_name() const {
  return absl::StrCat("tp.", dp_rank());
}

std::string RankMesh::dp_group_name() const {
  return absl::StrCat("dp.", tp_rank());
}

absl::StatusOr<std::unique_ptr<RankMesh>> RankMesh::Create(
    Communicator* world, const MeshOptions& options) {
  RETURN_IF_ERROR(ValidateMeshShape(world->world_size(), options.tp));
  std::unique_ptr<RankMesh> mesh(new RankMesh(world, options.tp));
  const MeshCoordinates at = mesh->coordinates();
  const int dp_size = mesh->dp_size();
  // The tp group first, then the dp group, on every rank: each creation
  // waits only for its own group's ranks, which all create in this order.
  ASSIGN_OR_RETURN(mesh->tp_, MakeGroup(world, options, mesh->tp_group_name(),
                                        at.tp, options.tp));
  ASSIGN_OR_RETURN(mesh->dp_, MakeGroup(world, options, mesh->dp_group_name(),
                                        at.dp, dp_size));
  return mesh;
}

absl::Status RankMesh::SetTimeout(absl::Duration timeout) {
  RETURN_IF_ERROR(world_->SetTimeout(timeout));
  RETURN_IF_ERROR(tp_->SetTimeout(timeout));
  return dp_->SetTimeout(timeout);
}

void RankMesh::MarkSteady() {
  world_->flight_recorder().MarkSteady();
  tp_->flight_recorder().MarkSteady();
  dp_->flight_recorder().MarkSteady();
}

}  // namespace mtb::collective
