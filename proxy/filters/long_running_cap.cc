#include "proxy/filters/long_running_cap.h"

#include "absl/strings/str_cat.h"

namespace kf {
namespace {

// Its own frame: the Status is not kept in every open watch's. Named, not a temporary bound
// to Reject's reference inside co_await (GCC 12 may free that twice).
asio::awaitable<void> RejectLongRunning(Exchange& x, WatchSlots::Refused refused) {
  const KubeStatus busy = TooManyRequestsStatus(1);
  co_await x.Reject(busy, refused == WatchSlots::Refused::kTotal
                              ? "refused: --max-passthrough-watches"
                              : "refused: --max-passthrough-watches-per-user");
}

}  // namespace

std::string LongRunningCap::IdentityKey(const Exchange& x) {
  if (x.user) return WatchCapKey(*x.user);
  if (x.unauthenticated) return "system:anonymous";
  // Unknown: not a user name a client can claim (those never hold a byte 0x1e).
  return absl::StrCat("\x1e", x.request.remote_ip);
}

asio::awaitable<void> LongRunningCap::Serve(Exchange& x, const Next& next) {
  const bool long_running = x.route == Route::kTunnel || x.request.info.verb == "watch";
  if (!long_running || x.priority_level == "exempt") {
    co_await next(x);
    co_return;
  }
  WatchSlots::Slot slot;  // Held while the relay streams the watch or the tunnel.
  const WatchSlots::Refused refused = slots_.Take(IdentityKey(x), &slot);
  if (refused != WatchSlots::Refused::kNone) {
    co_await RejectLongRunning(x, refused);
    co_return;
  }
  co_await next(x);
}

}  // namespace kf
