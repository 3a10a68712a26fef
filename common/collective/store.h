// A handle on a c10d key-value store, the rendezvous point of a group of ranks.
// c10d's headers stay in store.cc (heavy headers out of .h files).
#ifndef MTB_COMMON_COLLECTIVE_STORE_H_
#define MTB_COMMON_COLLECTIVE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mtb::collective {

// Copies share one store. Thread-safe (c10d stores are).
class Store {
 public:
  // A store in this process's memory (c10d::HashStore), for ranks run as
  // threads of one process (test_util.h). `timeout` bounds every wait on it,
  // the rendezvous of a process group included.
  static Store InProcess(absl::Duration timeout = absl::Minutes(5));

  // The same store with every key under "<prefix>/" (c10d::PrefixStore): one
  // per process group, so groups on one store never see each other's keys.
  Store WithPrefix(absl::string_view prefix) const;

  // Key-value access for tools that exchange small metadata (checksums,
  // addresses). Get waits up to `timeout` for the key to appear.
  absl::Status Set(absl::string_view key, absl::string_view value);
  // True when `key` has been set; never waits.
  absl::StatusOr<bool> Check(absl::string_view key);
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout);
  // Removes `key`; OK when it was not there (returns whether it was).
  absl::StatusOr<bool> Delete(absl::string_view key);

  // The port of the TCPStore this handle talks to (the one the OS chose when
  // hosted on port 0); 0 for an in-process store.
  int tcp_port() const;
  // "in-process", or "tcp://host:port", plus "/prefix" when prefixed.
  std::string DebugString() const;

  // For common/collective internals: holds the c10d::Store.
  struct Impl;
  const std::shared_ptr<Impl>& impl() const { return impl_; }
  explicit Store(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_STORE_H_
