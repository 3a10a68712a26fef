// Communicator: creation, settings and the issue protocol; the collectives
// themselves are in copy_collectives.cc and reduce_collectives.cc
// (communicator_internal.h has the vocabulary).
#include "common/collective/communicator.h"

#include <algorithm>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/collective/communicator_internal.h"
#include "common/collective/flight_dumps.h"
#include "common/collective/store_impl.h"
#include "common/libtorch/dtype.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"
#include "glog/logging.h"

namespace mtb::collective {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

absl::string_view ReduceScatterAlgorithmName(ReduceScatterAlgorithm algorithm) {
  switch (algorithm) {
    case ReduceScatterAlgorithm::kAuto:
      return "auto";
    case ReduceScatterAlgorithm::kAllToAll:
      return "alltoall";
    case ReduceScatterAlgorithm::kHalvingDoubling:
      return "halving_doubling";
    case ReduceScatterAlgorithm::kChunked:
      return "chunked";
  }
  return "unknown";
}

absl::StatusOr<ReduceScatterAlgorithm> ParseReduceScatterAlgorithm(
    absl::string_view name) {
  for (ReduceScatterAlgorithm algorithm :
       {ReduceScatterAlgorithm::kAuto, ReduceScatterAlgorithm::kAllToAll,
        ReduceScatterAlgorithm::kHalvingDoubling,
        ReduceScatterAlgorithm::kChunked}) {
    if (ReduceScatterAlgorithmName(algorithm) == name) return algorithm;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce-scatter algorithm '", name,
                   "'; expected auto, alltoall, halving_doubling or chunked"));
}

absl::string_view AllGatherAlgorithmName(AllGatherAlgorithm algorithm) {
  switch (algorithm) {
    case AllGatherAlgorithm::kAuto:
      return "auto";
    case AllGatherAlgorithm::kList:
      return "list";
    case AllGatherAlgorithm::kDirect:
      return "direct";
  }
  return "unknown";
}

absl::StatusOr<AllGatherAlgorithm> ParseAllGatherAlgorithm(
    absl::string_view name) {
  for (AllGatherAlgorithm algorithm :
       {AllGatherAlgorithm::kAuto, AllGatherAlgorithm::kList,
        AllGatherAlgorithm::kDirect}) {
    if (AllGatherAlgorithmName(algorithm) == name) return algorithm;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown all-gather algorithm '", name, "'; expected auto, list or direct"));
}

absl::string_view AllReduceAlgorithmName(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto:
      return "auto";
    case AllReduceAlgorithm::kRing:
      return "ring";
    case AllReduceAlgorithm::kBcube:
      return "bcube";
    case AllReduceAlgorithm::kReduceScatterAllGather:
      return "reduce_scatter_all_gather";
  }
  return "unknown";
}

absl::StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(absl::string_view name) {
  for (AllReduceAlgorithm algorithm :
       {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kRing, AllReduceAlgorithm::kBcube,
        AllReduceAlgorithm::kReduceScatterAllGather}) {
    if (AllReduceAlgorithmName(algorithm) == name) return algorithm;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown all-reduce algorithm '", name,
                   "'; expected auto, ring, bcube or reduce_scatter_all_gather"));
}

namespace {

// Every rank's host identity, through the store (collective).
absl::StatusOr<std::vector<std::string>> ExchangeHostIdentities(
    Store store, const CommunicatorOptions& options) {
  const std::string mine =
      options.host_id.empty() ? HostIdentity() : options.host_id;
  RETURN_IF_ERROR(store.Set(absl::StrCat("host/", options.rank), mine));
  std::vector<std::string> hosts;
  for (int p = 0; p < options.world_size; ++p) {
    ASSIGN_OR_RETURN(std::string host,
                     store.Get(absl::StrCat("host/", p), options.timeout));
    hosts.push_back(std::move(host));
  }
  return hosts;
}

// The shared-memory part of a communicator, when `options.transport` and the
// hosts call for one (ShmSetup::shm null otherwise). Across hosts
// (hierarchical): a group per host, and a Gloo group of one leader per host
// (each host's lowest rank; hosts numbered by their lowest rank).
absl::StatusOr<ShmSetup> MaybeCreateShm(const Store& store, const CommunicatorOptions& options,
                                        const GlooDevices& devices) {
  ShmSetup setup;
  if (options.transport == Transport::kTcp) return setup;
  ASSIGN_OR_RETURN(std::vector<std::string> hosts,
                   ExchangeHostIdentities(store.WithPrefix("transport"), options));
  std::vector<std::string> distinct;  // in order of each host's lowest rank
  for (const std::string& host : hosts) {
    if (std::find(distinct.begin(), distinct.end(), host) == distinct.end()) {
      distinct.push_back(host);
    }
  }
  const std::string& mine = hosts[options.rank];
  const int host_index =
      static_cast<int>(std::find(distinct.begin(), distinct.end(), mine) - distinct.begin());
  ShmGroupOptions shm_options;
  for (int p = 0; p < options.world_size; ++p) {
    if (hosts[p] != mine) continue;
    if (p == options.rank) shm_options.local_rank = static_cast<int>(setup.local_ranks.size());
    setup.local_ranks.push_back(p);
  }
  shm_options.local_size = static_cast<int>(setup.local_ranks.size());
  shm_options.global_ranks = setup.local_ranks;
  shm_options.slot_bytes = options.shm_slot_bytes;
  shm_options.slots = options.shm_slots;
  shm_options.connect_timeout = options.timeout;
  ASSIGN_OR_RETURN(setup.shm, ShmGroup::Create(store.WithPrefix(absl::StrCat("shm_", host_index)),
                                               shm_options));
  if (options.testonly_shm_misassign_slices) {
    setup.shm->SetTestOnlyFault(ShmTestOnlyFault::kMisassignSlices);
  }
  setup.hosts = static_cast<int>(distinct.size());
  if (setup.hosts > 1 && shm_options.local_rank == 0) {
    ASSIGN_OR_RETURN(setup.leaders,
                     CreateGlooProcessGroup(store.WithPrefix("leaders").impl()->store, host_index,
                                            setup.hosts, options.timeout, devices));
  }
  return setup;
}

}  // namespace

// ---------------------------------------------------------------------------
// Communicator::Impl: settings and the issue protocol.

Communicator::Impl::Impl(std::shared_ptr<CommState> state, Store store,
                         GlooDevices devices,
                         c10::intrusive_ptr<GlooProcessGroup> group,
                         const CommunicatorOptions& options, ShmSetup shm)
    : state_(std::move(state)),
      store_(std::move(store)),
      devices_(std::move(devices)),
      group_(std::move(group)),
      timeout_(options.timeout),
      reduce_scatter_algorithm_(options.reduce_scatter_algorithm),
      reduce_scatter_chunk_bytes_(options.reduce_scatter_chunk_bytes),
      reduce_scatter_depth_(options.reduce_scatter_depth),
      all_gather_algorithm_(options.all_gather_algorithm),
      all_reduce_algorithm_(options.all_reduce_algorithm),
      hosts_(shm.hosts),
      shm_ranks_(std::move(shm.local_ranks)),
      leaders_(std::move(shm.leaders)),
      shm_(std::move(shm.shm)) {
  if (shm_) shm_worker_ = std::make_unique<SerialWorker>();
}

Communicator::Impl::~Impl() {
  heartbeat.reset();  // its last line says the rank is done
  UnregisterFromSignalDumps(state_->recorder.get());
  if (shm_) {
    // An abandoned rank's queued collectives fail at once instead of
    // waiting for peers that will not come.
    if (state_->abandoned()) shm_->Abort();
    shm_worker_.reset();
  }
  if (!state_->abandoned()) return;
  if (leaders_) (void)c10::intrusive_ptr<GlooProcessGroup>(leaders_).release();
  // A reference that is never dropped: the group, its worker threads and
  // their work live until the process exits.
  c10::intrusive_ptr<GlooProcessGroup> leaked = group_;
  (void)leaked.release();
  {
    absl::MutexLock lock(&issue_mutex_);
    if (halving_doubling_context_) {
      new std::shared_ptr<::gloo::rendezvous::Context>(
          halving_doubling_context_);
    }
  }
  LOG(WARNING) << "rank " << rank() << ": communicator abandoned ("
               << state_->Health().message()
               << "); its process group is left to the process exit";
}

absl::Duration Communicator::Impl::timeout() const {
  absl::MutexLock lock(&issue_mutex_);
  return timeout_;
}

absl::Status Communicator::Impl::SetTimeout(absl::Duration timeout) {
  absl::MutexLock lock(&issue_mutex_);
  RETURN_IF_ERROR(state_->Health());
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetTimeout: timeout must be positive, got ",
                     absl::FormatDuration(timeout)));
  }
  if (const int64_t in_flight = state_->log.InFlight(); in_flight > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("SetTimeout on rank ", rank(), ": ", in_flight,
                     " collective(s) still in flight; Wait() for them first"));
  }
  group_->SetTimeout(ToChronoMs(timeout));
  if (leaders_) leaders_->SetTimeout(ToChronoMs(timeout));
  timeout_ = timeout;
  if (halving_doubling_context_) {
    // Its pairs keep the timeout they were built with: rebuild at next use.
    halving_doubling_context_.reset();
    ++halving_doubling_generation_;
  }
  return absl::OkStatus();
}

void Communicator::Impl::SetReduceScatterAlgorithm(
    ReduceScatterAlgorithm algorithm) {
  absl::MutexLock lock(&issue_mutex_);
  reduce_scatter_algorithm_ = algorithm;
}

ReduceScatterAlgorithm Communicator::Impl::reduce_scatter_algorithm() const {
  absl::MutexLock lock(&issue_mutex_);
  return reduce_scatter_algorithm_;
}

void Communicator::Impl::SetAllReduceAlgorithm(AllReduceAlgorithm algorithm) {
  absl::MutexLock lock(&issue_mutex_);
  all_reduce_algorithm_ = algorithm;
}

AllReduceAlgorithm Communicator::Impl::all_reduce_algorithm() const {
  absl::MutexLock lock(&issue_mutex_);
  return all_reduce_algorithm_;
}

void Communicator::Impl::SetAllGatherAlgorithm(AllGatherAlgorithm algorithm) {
  absl::MutexLock lock(&issue_mutex_);
  all_gather_algorithm_ = algorithm;
}

AllGatherAlgorithm Communicator::Impl::all_gather_algorithm() const {
  absl::MutexLock lock(&issue_mutex_);
  return all_gather_algorithm_;
}

int Communicator::Impl::NextReservedTag() {
  const int tag = kFirstReservedTag + reserved_tag_counter_;
  reserved_tag_counter_ = (reserved_tag_counter_ + 1) % kFirstReservedTag;
  return tag;
}

std::string Communicator::Impl::What(CollectiveOp kind) const {
  return absl::StrCat(CollectiveOpName(kind), " on rank ", rank(), " of ",
                      world_size());
}

absl::Status Communicator::Impl::Usable(CollectiveOp kind) const {
  absl::Status health = state_->Health();
  if (health.ok()) return health;
  return absl::FailedPreconditionError(
      absl::StrCat(What(kind),
                   ": refused, the communicator is unusable after an earlier "
                   "failure: ",
                   health.message()));
}

CollectiveHandle Communicator::Impl::Refuse(const absl::Status& problem) {
  state_->Break(problem);
  return CollectiveHandle(std::make_shared<PendingCollective>(problem));
}

absl::Status Communicator::Impl::CheckRank(absl::string_view what,
                                           absl::string_view name,
                                           int value) const {
  if (value >= 0 && value < world_size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", name, " ", value,
                                                 " is not a rank in [0, ",
                                                 world_size(), ")"));
}

absl::Status Communicator::Impl::CheckRowTensors(absl::string_view what,
                                                 const at::Tensor& input,
                                                 const at::Tensor& output,
                                                 TensorUse use) {
  RETURN_IF_ERROR(CheckTensor(what, "input", input, use));
  RETURN_IF_ERROR(CheckTensor(what, "output", output, use));
  RETURN_IF_ERROR(CheckSameDtype(what, "output", output, "input", input));
  RETURN_IF_ERROR(CheckHasRows(what, "input", input));
  RETURN_IF_ERROR(CheckHasRows(what, "output", output));
  return CheckSameRowShape(what, "output", output, "input", input);
}

CollectiveRecord Communicator::Impl::NewRecord(CollectiveOp kind,
                                               const at::Tensor& caller,
                                               const at::Tensor& transport,
                                               const at::Tensor& s_tensor) {
  CollectiveRecord record;
  record.op = kind;
  record.dtype = std::string(DtypeName(caller.scalar_type()));
  record.transport_dtype = std::string(DtypeName(transport.scalar_type()));
  record.elements = s_tensor.numel();
  record.size_bytes = s_tensor.nbytes();
  return record;
}

void Communicator::Impl::SetTraffic(CollectiveRecord& record, Traffic traffic) {
  record.bytes_sent = traffic.sent;
  record.bytes_received = traffic.received;
}

CollectiveHandle Communicator::Impl::Launch(
    CollectiveRecord record, const std::function<Launched()>& launch) {
  record = state_->log.Issue(std::move(record));
  state_->recorder->Issued(record);
  auto pending = std::make_shared<PendingCollective>(state_, record, timeout_);
  // The issuing thread is in the call until it returns, and a launch can
  // block: the first bcube all-reduce connects its Gloo context
  // (HalvingDoublingContext) and needs every peer there. Marked waiting, so
  // the heartbeat names the peer that never arrives (a hang in step 1)
  // instead of reporting a rank that is in a collective but waits for
  // nothing.
  state_->recorder->SetWaiting(record.sequence, true);
  absl::StatusOr<Launched> launched = CallGuarded(kGloo, launch);
  state_->recorder->SetWaiting(record.sequence, false);
  if (!launched.ok()) {
    pending->CompleteNow(launched.status(), absl::ZeroDuration());
  } else {
    pending->Launched(std::move(launched->work), std::move(launched->finish),
                      std::move(launched->phases));
  }
  return CollectiveHandle(std::move(pending));
}

CollectiveHandle Communicator::Impl::LaunchShm(
    CollectiveRecord record, std::function<void(ShmGroup&, absl::Time)> body,
    std::function<void()> finish) {
  return Launch(std::move(record), [&] {
    ShmGroup* shm = shm_.get();  // outlives the worker (member order)
    const absl::Duration timeout = timeout_;
    return Launched{shm_worker_->Run([shm, timeout, body = std::move(body)] {
                      body(*shm, absl::Now() + timeout);
                    }),
                    std::move(finish)};
  });
}

CollectiveHandle Communicator::Impl::RunNow(CollectiveRecord record,
                                            const std::function<void()>& run) {
  record = state_->log.Issue(std::move(record));
  state_->recorder->Issued(record);
  auto pending = std::make_shared<PendingCollective>(state_, record, timeout_);
  const absl::Time start = absl::Now();
  // This thread blocks in it as in a Wait().
  state_->recorder->SetWaiting(record.sequence, true);
  const absl::Status status = CallGuarded(kGloo, run);
  pending->CompleteNow(status, absl::Now() - start);
  return CollectiveHandle(std::move(pending));
}

// ---------------------------------------------------------------------------
// Communicator.

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const Store& store, const CommunicatorOptions& options) {
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: rank ", options.rank,
                     " is not in [0, world_size ", options.world_size, ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: timeout must be positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  if (options.reduce_scatter_chunk_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: reduce_scatter_chunk_bytes must be "
                     "positive, got ",
                     options.reduce_scatter_chunk_bytes));
  }
  if (options.shm_slot_bytes < 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Communicator: shm_slot_bytes must be at least 4096, got ", options.shm_slot_bytes));
  }
  if (options.shm_slots < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: shm_slots must be at least 2, got ", options.shm_slots));
  }
  if (options.reduce_scatter_depth <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: reduce_scatter_depth must be positive, got ",
                     options.reduce_scatter_depth));
  }
  ASSIGN_OR_RETURN(GlooDevices devices,
                   MakeGlooDevices(GlooDeviceSpec{options.gloo_interface,
                                                  options.gloo_hostname}));
  ASSIGN_OR_RETURN(
      c10::intrusive_ptr<GlooProcessGroup> group,
      CreateGlooProcessGroup(store.impl()->store, options.rank,
                             options.world_size, options.timeout, devices));
  ASSIGN_OR_RETURN(ShmSetup shm, MaybeCreateShm(store, options, devices));
  LOG(INFO) << "rank " << options.rank << ": collectives over "
            << (shm.shm == nullptr ? std::string("gloo (tcp)")
                                   : absl::StrCat(shm.shm->Describe(),
                                                  shm.hosts > 1
                                                      ? absl::StrCat(" within each of ", shm.hosts,
                                                                     " hosts, gloo among leaders")
                                                      : ""));
  auto state = std::make_shared<CommState>(options.rank, options.world_size,
                                           options.keep_records,
                                           options.flight_recorder_entries);
  FlightIdentity identity;
  identity.rank = options.rank;
  identity.world_size = options.world_size;
  state->recorder->SetIdentity(identity);
  return std::unique_ptr<Communicator>(new Communicator(std::make_unique<Impl>(
      std::move(state), store, std::move(devices), std::move(group), options,
      std::move(shm))));
}

Communicator::Communicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

void Communicator::Abandon(const absl::Status& why) {
  impl_->state().Abandon(why.ok() ? absl::AbortedError("abandoned") : why);
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::world_size() const { return impl_->world_size(); }
absl::string_view Communicator::transport() const { return impl_->transport(); }
absl::Duration Communicator::timeout() const { return impl_->timeout(); }
const std::string& Communicator::device_description() const {
  return impl_->device_description();
}
const Store& Communicator::store() const { return impl_->store(); }
absl::Status Communicator::health() const { return impl_->state().Health(); }
absl::Status Communicator::SetTimeout(absl::Duration timeout) {
  return impl_->SetTimeout(timeout);
}
void Communicator::SetReduceScatterAlgorithm(ReduceScatterAlgorithm algorithm) {
  impl_->SetReduceScatterAlgorithm(algorithm);
}
ReduceScatterAlgorithm Communicator::reduce_scatter_algorithm() const {
  return impl_->reduce_scatter_algorithm();
}
void Communicator::SetAllGatherAlgorithm(AllGatherAlgorithm algorithm) {
  impl_->SetAllGatherAlgorithm(algorithm);
}
AllGatherAlgorithm Communicator::all_gather_algorithm() const {
  return impl_->all_gather_algorithm();
}
void Communicator::SetAllReduceAlgorithm(AllReduceAlgorithm algorithm) {
  impl_->SetAllReduceAlgorithm(algorithm);
}
AllReduceAlgorithm Communicator::all_reduce_algorithm() const {
  return impl_->all_reduce_algorithm();
}
int64_t Communicator::TemporaryBytes() const {
  return impl_->state().temporaries.LiveBytes();
}

CollectiveLog& Communicator::log() { return impl_->state().log; }
FlightRecorder& Communicator::flight_recorder() {
  return *impl_->state().recorder;
}
void Communicator::EnableFlightRecorderDumps(const std::string& path) {
  impl_->state().recorder->SetDumpPath(path);
  RegisterForSignalDumps(impl_->state().recorder);
}
void Communicator::StartHeartbeat(int fd, absl::Duration interval) {
  impl_->heartbeat = std::make_unique<HeartbeatSender>(
      impl_->state().recorder, fd, interval);
}
const CollectiveLog& Communicator::log() const { return impl_->state().log; }

absl::Status Communicator::AllReduce(const at::Tensor& tensor, ReduceOp op) {
  return AllReduceAsync(tensor, op).Wait();
}
CollectiveHandle Communicator::AllReduceAsync(const at::Tensor& tensor,
                                              ReduceOp op) {
  return impl_->AllReduce(tensor, op);
}
absl::Status Communicator::Broadcast(const at::Tensor& tensor, int root) {
  return BroadcastAsync(tensor, root).Wait();
}
CollectiveHandle Communicator::BroadcastAsync(const at::Tensor& tensor,
                                              int root) {
  return impl_->Broadcast(tensor, root);
}
absl::Status Communicator::AllGather(const at::Tensor& input,
                                     const at::Tensor& output) {
  return AllGatherAsync(input, output).Wait();
}
CollectiveHandle Communicator::AllGatherAsync(const at::Tensor& input,
                                              const at::Tensor& output) {
  return impl_->AllGather(input, output);
}
absl::Status Communicator::AllGatherList(
    const at::Tensor& input, const std::vector<at::Tensor>& outputs) {
  return AllGatherListAsync(input, outputs).Wait();
}
CollectiveHandle Communicator::AllGatherListAsync(
    const at::Tensor& input, const std::vector<at::Tensor>& outputs) {
  return impl_->AllGatherList(input, outputs);
}
absl::Status Communicator::AllGatherV(const at::Tensor& input,
                                      const at::Tensor& output,
                                      absl::Span<const int64_t> counts) {
  return AllGatherVAsync(input, output, counts).Wait();
}
CollectiveHandle Communicator::AllGatherVAsync(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts) {
  return impl_->AllGatherV(input, output, counts);
}
absl::Status Communicator::ReduceScatter(const at::Tensor& input,
                                         const at::Tensor& output,
                                         ReduceOp op) {
  return ReduceScatterAsync(input, output, op).Wait();
}
CollectiveHandle Communicator::ReduceScatterAsync(const at::Tensor& input,
                                                  const at::Tensor& output,
                                                  ReduceOp op) {
  return impl_->ReduceScatter(input, output, op);
}
absl::Status Communicator::ReduceScatterV(const at::Tensor& input,
                                          const at::Tensor& output,
                                          absl::Span<const int64_t> counts,
                                          ReduceOp op) {
  return ReduceScatterVAsync(input, output, counts, op).Wait();
}
CollectiveHandle Communicator::ReduceScatterVAsync(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts, ReduceOp op) {
  return impl_->ReduceScatterV(input, output, counts, op);
}
absl::Status Communicator::AllToAll(const at::Tensor& input,
                                    const at::Tensor& output) {
  return AllToAllAsync(input, output).Wait();
}
CollectiveHandle Communicator::AllToAllAsync(const at::Tensor& input,
                                             const at::Tensor& output) {
  return impl_->AllToAll(input, output);
}
absl::Status Communicator::AllToAllV(const at::Tensor& input,
                                     const at::Tensor& output,
                                     absl::Span<const int64_t> send_counts,
                                     absl::Span<const int64_t> recv_counts) {
  return AllToAllVAsync(input, output, send_counts, recv_counts).Wait();
}
CollectiveHandle Communicator::AllToAllVAsync(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> send_counts,
    absl::Span<const int64_t> recv_counts) {
  return impl_->AllToAllV(input, output, send_counts, recv_counts);
}
absl::Status Communicator::Barrier() { return BarrierAsync().Wait(); }
CollectiveHandle Communicator::BarrierAsync() { return impl_->Barrier(); }
absl::Status Communicator::Send(const at::Tensor& tensor, int peer, int tag) {
  return SendAsync(tensor, peer, tag).Wait();
}
CollectiveHandle Communicator::SendAsync(const at::Tensor& tensor, int peer,
                                         int tag) {
  return impl_->PointToPoint(CollectiveOp::kSend, tensor, peer, tag);
}
absl::Status Communicator::Recv(const at::Tensor& tensor, int peer, int tag) {
  return RecvAsync(tensor, peer, tag).Wait();
}
CollectiveHandle Communicator::RecvAsync(const at::Tensor& tensor, int peer,
                                         int tag) {
  return impl_->PointToPoint(CollectiveOp::kRecv, tensor, peer, tag);
}

}  // namespace mtb::collective
