#include "common/collective/store.h"

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/collective/store_impl.h"
#include "common/libtorch/torch_status.h"
#include "torch/csrc/distributed/c10d/HashStore.hpp"
#include "torch/csrc/distributed/c10d/PrefixStore.hpp"

namespace mtb::collective {

Store WrapC10dStore(c10::intrusive_ptr<c10d::Store> store,
                    std::string description, int tcp_port) {
  auto impl = std::make_shared<Store::Impl>();
  impl->store = std::move(store);
  impl->description = std::move(description);
  impl->tcp_port = tcp_port;
  return Store(std::move(impl));
}

Store Store::InProcess(absl::Duration timeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(
      std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  return WrapC10dStore(std::move(store), "in-process", /*tcp_port=*/0);
}

Store Store::WithPrefix(absl::string_view prefix) const {
  return WrapC10dStore(
      c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), impl_->store),
      absl::StrCat(impl_->description, "/", prefix), impl_->tcp_port);
}

absl::Status Store::Set(absl::string_view key, absl::string_view value) {
  return CallGuarded(
      absl::StrCat("store set '", key, "' on ", DebugString()), [&] {
        impl_->store->set(std::string(key),
                          std::vector<uint8_t>(value.begin(), value.end()));
      });
}

absl::StatusOr<std::string> Store::Get(absl::string_view key,
                                       absl::Duration timeout) {
  return CallGuarded(
      absl::StrCat("store get '", key, "' on ", DebugString(), " (timeout ",
                   absl::FormatDuration(timeout), ")"),
      [&] {
        const std::string k(key);
        impl_->store->wait(
            {k}, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
        std::vector<uint8_t> value = impl_->store->get(k);
        return std::string(value.begin(), value.end());
      });
}

absl::StatusOr<bool> Store::Check(absl::string_view key) {
  return CallGuarded(
      absl::StrCat("store check '", key, "' on ", DebugString()),
      [&] { return impl_->store->check({std::string(key)}); });
}

absl::StatusOr<bool> Store::Delete(absl::string_view key) {
  return CallGuarded(
      absl::StrCat("store delete '", key, "' on ", DebugString()),
      [&] { return impl_->store->deleteKey(std::string(key)); });
}

int Store::tcp_port() const { return impl_->tcp_port; }

std::string Store::DebugString() const { return impl_->description; }

}  // namespace mtb::collective
