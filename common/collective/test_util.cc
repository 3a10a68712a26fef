#include "common/collective/test_util.h"

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ATen/CPUGeneratorImpl.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/logging.h"

namespace mtb::collective {

absl::Status RunRanksAsThreads(int world_size,
                               const std::function<void(Communicator&)>& body,
                               const ThreadRanksOptions& options) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("RunRanksAsThreads: world_size ", world_size, " < 1"));
  }
  const Store store = Store::InProcess(options.timeout);
  absl::Mutex mutex;
  int finished = 0;  // bodies done (or skipped), guarded by mutex
  std::vector<absl::Status> statuses(world_size);
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      ScopedThreadLogRank log_rank(rank);
      CommunicatorOptions communicator_options;
      communicator_options.rank = rank;
      communicator_options.world_size = world_size;
      communicator_options.timeout = options.timeout;
      communicator_options.gloo_hostname = "127.0.0.1";
      communicator_options.reduce_scatter_algorithm =
          options.reduce_scatter_algorithm;
      communicator_options.reduce_scatter_chunk_bytes =
          options.reduce_scatter_chunk_bytes;
      communicator_options.reduce_scatter_depth = options.reduce_scatter_depth;
      communicator_options.all_gather_algorithm = options.all_gather_algorithm;
      communicator_options.all_reduce_algorithm = options.all_reduce_algorithm;
      communicator_options.transport = options.transport;
      if (options.host_id) communicator_options.host_id = options.host_id(rank);
      communicator_options.testonly_shm_misassign_slices =
          options.testonly_shm_misassign_slices;
      communicator_options.shm_slot_bytes = options.shm_slot_bytes;
      communicator_options.shm_slots = options.shm_slots;
      absl::StatusOr<std::unique_ptr<Communicator>> communicator =
          Communicator::Create(store, communicator_options);
      if (!communicator.ok()) {
        statuses[rank] = communicator.status();
      } else {
        try {
          body(**communicator);
        } catch (const std::exception& error) {
          statuses[rank] = absl::InternalError(
              absl::StrCat("rank ", rank, " threw: ", error.what()));
        } catch (...) {
          statuses[rank] = absl::InternalError(
              absl::StrCat("rank ", rank, " threw a non-std::exception"));
        }
      }
      absl::MutexLock lock(&mutex);
      ++finished;
      const auto all_finished = [&] { return finished == world_size; };
      mutex.Await(absl::Condition(&all_finished));
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

at::Generator RankGenerator(uint64_t seed, int rank) {
  // Distinct for distinct (seed, rank) pairs while rank < 2^16.
  return at::make_generator<at::CPUGeneratorImpl>((seed << 16) ^
                                                  static_cast<uint64_t>(rank));
}

}  // namespace mtb::collective
