// A 2-D rank mesh: world = dp x tp, tensor parallelism innermost, so the
// tp ranks of one data-parallel replica are contiguous (Megatron-LM's and
// torchtitan's order: the tp group's activation collectives stay on the
// fastest links). World rank w is (dp index w / tp, tp index w % tp):
//
//   tp group g (g in [0, dp)):  world ranks g*tp .. g*tp + tp - 1
//   dp group j (j in [0, tp)):  world ranks j, j + tp, j + 2*tp, ...
//
// Each group is a Communicator of its own (common/collective/communicator.h)
// on its own store prefix ("mesh/tp.<g>", "mesh/dp.<j>" under the world
// communicator's store), so it has its own sequence numbers, records and
// byte totals, flight recorder (identity group "tp.<g>" / "dp.<j>", dumps in
// a folder of that name), and timeouts (SetTimeout sets them on every
// communicator of the mesh). A group is its own communicator even when it
// spans the whole world (its figures are then its own, not the world's); a
// group of one rank is a one-rank communicator (its collectives are local
// copies, counted like any other).
//
// docs/tp.md says how the trainer uses it.
#ifndef MTB_COMMON_COLLECTIVE_MESH_H_
#define MTB_COMMON_COLLECTIVE_MESH_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/collective/flight_recorder.h"

namespace mtb::collective {

struct MeshCoordinates {
  int dp = 0;  // which tp group: world_rank / tp
  int tp = 0;  // which dp group: world_rank % tp
};

// (dp, tp) of `world_rank` in a mesh with `tp` ranks per tp group.
MeshCoordinates MeshCoordinatesOf(int world_rank, int tp);
// The world rank of (dp, tp).
int MeshWorldRank(const MeshCoordinates& at, int tp);

// kInvalidArgument unless tp >= 1 divides world_size (naming both).
absl::Status ValidateMeshShape(int world_size, int tp);

struct MeshOptions {
  // Ranks per tp group; must divide the world size.
  int tp = 1;
  // The groups' communicators take everything but rank and world_size from
  // here (the world's own options: interface, transport, timeout, ...).
  CommunicatorOptions communicator;
  // The world's flight identity (run id, attempt); each group's recorder
  // gets it with its own rank, size and group name.
  FlightIdentity identity;
  // Non-empty: each group's flight recorder dumps to
  // <flight_recorder_dir>/<group>/FlightDumpFileName(...) on failure.
  std::string flight_recorder_dir;
};

class RankMesh {
 public:
  // Collective over `world` (not owned; must outlive the mesh): every rank
  // calls it with the same options. Builds this rank's tp group, then its
  // dp group.
  static absl::StatusOr<std::unique_ptr<RankMesh>> Create(
      Communicator* world, const MeshOptions& options);
  RankMesh(const RankMesh&) = delete;
  RankMesh& operator=(const RankMesh&) = delete;

  int world_size() const { return world_->world_size(); }
  int world_rank() const { return world_->rank(); }
  int tp_size() const { return tp_size_; }
  int dp_size() const { return world_->world_size() / tp_size_; }
  MeshCoordinates coordinates() const {
    return MeshCoordinatesOf(world_->rank(), tp_size_);
  }
  int tp_rank() const { return coordinates().tp; }
  int dp_rank() const { return coordinates().dp; }

  Communicator* world() const { return world_; }
  // This rank's tp group (rank tp_rank() of tp_size()).
  Communicator* tp() const { return tp_.get(); }
  // This rank's dp group (rank dp_rank() of dp_size()).
  Communicator* dp() const { return dp_.get(); }
  // "tp.<g>" and "dp.<j>": the groups' names (store prefixes, flight
  // identities).
  std::string tp_group_name() const;
  std::string dp_group_name() const;

  // Sets the timeout on the world's and both groups' communicators (the
  // Communicator::SetTimeout contract applies to each).
  absl::Status SetTimeout(absl::Duration timeout);
  // Marks the world's and both groups' flight recorders steady.
  void MarkSteady();

 private:
  RankMesh(Communicator* world, int tp) : world_(world), tp_size_(tp) {}
  Communicator* world_;
  int tp_size_;
  std::unique_ptr<Communicator> tp_, dp_;
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_MESH_H_
