#include "proxy/filters/in_flight_cap.h"

#include "absl/cleanup/cleanup.h"

namespace kf {
namespace {

// Its own frame: the Status is not kept in every passed-through request's. Named, not a
// temporary bound to Reject's reference inside co_await (GCC 12 may free that twice).
asio::awaitable<void> RejectBusy(Exchange& x) {
  const KubeStatus busy = TooManyRequestsStatus(1);
  co_await x.Reject(busy, "admission: upstream-busy");
}

}  // namespace

asio::awaitable<void> InFlightCap::Serve(Exchange& x, const Next& next) {
  const bool counted = limit_ > 0 && x.route == Route::kPassthrough &&
                       x.request.info.verb != "watch" && x.priority_level != "exempt";
  if (!counted) {
    co_await next(x);
    co_return;
  }
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= limit_) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    co_await RejectBusy(x);
    co_return;
  }
  absl::Cleanup release = [this] { in_flight_.fetch_sub(1, std::memory_order_relaxed); };
  co_await next(x);
}

}  // namespace kf
