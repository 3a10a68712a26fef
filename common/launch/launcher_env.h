// Which launcher started this process, and the torchrun variables it implies.
//
// A rank learns who it is from the variables of whatever started it. Four
// families are understood, read in this order (docs/launch.md, "Slurm and
// MPI"):
//
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
//              (our launcher, torchrun, or a person by hand)
//   Open MPI   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//              OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//   Slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID and
//              SLURM_STEP_TASKS_PER_NODE, only inside a job step (SLURM_STEP_ID
//              set: srun); an sbatch script's own shell is not a rank
//   PMI        PMI_RANK, PMI_SIZE (MPICH, Intel MPI, srun --mpi=pmi2), with
//              MPI_LOCALRANKID / MPI_LOCALNRANKS when the launcher sets them
//
// The first family present describes the rank. Another family present with
// the same world size describes the same launch and must agree on the rank
// (else an error names both variables: a stale `export RANK=0` under srun
// would otherwise make two ranks 0). One with a different world size is an
// outer launch that started a launcher (torchrun under srun, mpirun inside
// an sbatch script) and is ignored.
//
// Where the group meets, when MASTER_ADDR / MASTER_PORT are not set:
//   address  Slurm: the first host of SLURM_STEP_NODELIST (else
//            SLURM_JOB_NODELIST), where srun starts task 0; MPI: 127.0.0.1
//            when every rank is on this host, else MASTER_ADDR is required
//   port     kDerivedPortBase + a hash of the job's id (Slurm job and step,
//            Open MPI's job id, the PMIx namespace) modulo kDerivedPortRange:
//            every rank of a job computes the same port, and two jobs rarely
//            the same one
// Torch-free; pure functions of the environment given.
#ifndef MTB_COMMON_LAUNCH_LAUNCHER_ENV_H_
#define MTB_COMMON_LAUNCH_LAUNCHER_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

using EnvMap = std::map<std::string, std::string>;

// Derived ports lie in [kDerivedPortBase, kDerivedPortBase +
// kDerivedPortRange): below Linux's ephemeral range (32768-60999), so an
// outgoing connection never holds the port a store is about to bind.
inline constexpr int kDerivedPortBase = 20000;
inline constexpr int kDerivedPortRange = 10000;

// The launcher families above, by the names doctor and the logs print:
// "torchrun", "openmpi", "pmi", "slurm"; "none" when no family is present.
std::string DetectedLauncher(const EnvMap& env);

// True when some family describes this process as a rank.
bool HasLauncherRankEnv(const EnvMap& env);

// `env` with the torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RUN_ID) filled in from the first family present, as the rules
// above say; variables already set are kept. Unchanged when torchrun's own
// variables are the first family (they are validated by ParseRankEnv).
// Errors (kInvalidArgument, one line naming the variables): two families
// disagreeing, a family half set ("OMPI_COMM_WORLD_RANK=1 is set but
// OMPI_COMM_WORLD_SIZE is not"), a value that is not a number, a nodelist
// that does not parse, no MASTER_ADDR across hosts, no job id for the port.
absl::StatusOr<EnvMap> WithLauncherVariables(const EnvMap& env);

// Slurm's hostlist syntax, as in SLURM_JOB_NODELIST: "node[01-03,7],gpu5"
// -> node01 node02 node03 node7 gpu5. Zero padding of a range's first
// number is kept; several bracket groups in one name ("r[1-2]n[1-2]")
// expand as a product. kInvalidArgument naming `nodelist` when it does not
// parse.
absl::StatusOr<std::vector<std::string>> ExpandNodelist(absl::string_view nodelist);

// Slurm's compressed task counts, as in SLURM_STEP_TASKS_PER_NODE:
// "2(x3),1" -> 2 2 2 1.
absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view tasks_per_node);

// kDerivedPortBase + FNV-1a(job_id) % kDerivedPortRange.
int PortFromJobId(absl::string_view job_id);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_LAUNCHER_ENV_H_
