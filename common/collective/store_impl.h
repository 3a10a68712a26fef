// Internal to common/collective: the c10d side of Store. Pulls in c10d headers; only
// .cc files include it.
#ifndef MTB_COMMON_COLLECTIVE_STORE_IMPL_H_
#define MTB_COMMON_COLLECTIVE_STORE_IMPL_H_

#include <string>

#include "common/collective/store.h"
#include "torch/csrc/distributed/c10d/Store.hpp"

namespace mtb::collective {

struct Store::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  // For DebugString() and tcp_port().
  std::string description;
  int tcp_port = 0;
};

// Wraps a c10d store (rendezvous.cc, tests).
Store WrapC10dStore(c10::intrusive_ptr<c10d::Store> store,
                    std::string description, int tcp_port);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_STORE_IMPL_H_
