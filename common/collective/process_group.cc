#include "common/collective/process_group.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gloo/context.h"
#include "gloo/transport/context.h"
#include "common/libtorch/torch_status.h"
#include "torch/csrc/distributed/c10d/PrefixStore.hpp"

namespace mtb::collective {
namespace {

absl::StatusOr<GlooDevices> DevicesForInterfaces(absl::string_view interfaces,
                                                 absl::string_view origin) {
  GlooDevices result;
  result.description = std::string(origin);
  for (absl::string_view name :
       absl::StrSplit(interfaces, ',', absl::SkipEmpty())) {
    absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> device =
        CallGuarded(absl::StrCat("gloo device for interface '", name, "' (",
                                 origin, ")"),
                    [&] {
                      return c10d::ProcessGroupGloo::createDeviceForInterface(
                          std::string(name));
                    });
    if (!device.ok()) return device.status();
    result.devices.push_back(*std::move(device));
  }
  if (result.devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo device: no interface name in '", interfaces, "' (", origin, ")"));
  }
  return result;
}

// gloo::rendezvous::Store over a c10d store whose waits all use `timeout`
// (c10d's own ProcessGroupGloo::GlooStore waits up to 5 minutes when Gloo
// calls the wait without a timeout).
class TimedGlooStore : public ::gloo::rendezvous::Store {
 public:
  TimedGlooStore(c10::intrusive_ptr<c10d::Store> store,
                 std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& value) override {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::vector<char> get(const std::string& key) override {
    store_->wait({key}, timeout_);
    const std::vector<uint8_t> value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    store_->wait(keys, timeout_);
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace

absl::StatusOr<GlooDevices> MakeGlooDevices(const GlooDeviceSpec& spec) {
  if (!spec.interface.empty()) {
    return DevicesForInterfaces(spec.interface,
                                absl::StrCat("interface ", spec.interface));
  }
  if (!spec.hostname.empty()) {
    GlooDevices result;
    result.description = absl::StrCat("hostname ", spec.hostname);
    absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> device =
        CallGuarded(
            absl::StrCat("gloo device for hostname '", spec.hostname, "'"),
            [&] {
              return c10d::ProcessGroupGloo::createDeviceForHostname(
                  spec.hostname);
            });
    if (!device.ok()) return device.status();
    result.devices.push_back(*std::move(device));
    return result;
  }
  if (const char* env = std::getenv("GLOO_SOCKET_IFNAME");
      env != nullptr && *env != '\0') {
    return DevicesForInterfaces(env, absl::StrCat("GLOO_SOCKET_IFNAME=", env));
  }
  GlooDevices result;
  result.description = "default device";
  absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> device =
      CallGuarded("gloo default device",
                  [] { return c10d::ProcessGroupGloo::createDefaultDevice(); });
  if (!device.ok()) return device.status();
  result.devices.push_back(*std::move(device));
  return result;
}

namespace {

// gloo::Context keeps the transport context its send/recv buffers wait on
// (an unset timeout there reads the transport context's) in a protected
// member; a pointer to that member, taken in a derived class, reads it.
struct TransportContextOf : ::gloo::Context {
  static ::gloo::transport::Context* Of(::gloo::Context& context) {
    return (context.*(&TransportContextOf::transportContext_)).get();
  }
};

}  // namespace

void GlooProcessGroup::SetTimeout(std::chrono::milliseconds timeout) {
  getOptions()->timeout = timeout;
  for (const std::shared_ptr<::gloo::Context>& context : contexts_) {
    context->setTimeout(timeout);
    // Send and recv: the transport context's timeout, set from the context's
    // when the group was built, is what their waits read.
    if (::gloo::transport::Context* transport = TransportContextOf::Of(*context)) {
      transport->setTimeout(timeout);
    }
  }
}

absl::StatusOr<c10::intrusive_ptr<GlooProcessGroup>> CreateGlooProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration timeout, const GlooDevices& devices) {
  auto options = c10d::ProcessGroupGloo::Options::create(ToChronoMs(timeout));
  options->devices = devices.devices;
  return CallGuarded(
      absl::StrCat("creating the Gloo process group (rank ", rank, " of ",
                   world_size, ", ", devices.description, ", timeout ",
                   absl::FormatDuration(timeout), ")"),
      [&] {
        return c10::make_intrusive<GlooProcessGroup>(store, rank, world_size,
                                                     options);
      });
}

absl::StatusOr<std::shared_ptr<::gloo::rendezvous::Context>> CreateGlooContext(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration timeout, const GlooDevices& devices) {
  return CallGuarded(
      absl::StrCat("connecting a gloo context (rank ", rank, " of ", world_size,
                   ", ", devices.description, ")"),
      [&] {
        auto context =
            std::make_shared<::gloo::rendezvous::Context>(rank, world_size);
        context->setTimeout(ToChronoMs(timeout));
        TimedGlooStore gloo_store(store, ToChronoMs(timeout));
        std::shared_ptr<::gloo::transport::Device> device = devices.devices[0];
        context->connectFullMesh(gloo_store, device);
        return context;
      });
}

}  // namespace mtb::collective
