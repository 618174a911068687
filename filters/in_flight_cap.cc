#include "filters/in_flight_cap.h"

#include "absl/cleanup/cleanup.h"

namespace kf {

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
    co_await x.Reject(TooManyRequestsStatus(1), "admission: upstream-busy");
    co_return;
  }
  absl::Cleanup release = [this] { in_flight_.fetch_sub(1, std::memory_order_relaxed); };
  co_await next(x);
}

}  // namespace kf
