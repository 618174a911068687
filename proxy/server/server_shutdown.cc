// Server::ShutdownAfterDelay: --shutdown-delay-duration, the apiserver's flag of that name.
// During the delay /readyz fails while every listener keeps accepting and every request is
// served as before, so a Service (EndpointSlice, kube-proxy) or a load balancer takes the
// replica out of rotation before its listeners close; then the graceful stop (BeginShutdown).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "proxy/server/server.h"

namespace kf {

asio::awaitable<void> Server::ShutdownAfterDelay(int signal) {
  health_.SetShuttingDown();
  const absl::Duration delay = options_.shutdown_delay_duration;
  if (delay > absl::ZeroDuration()) {
    log_.Info("shutdown delayed: /readyz fails, requests are still served",
              {{"signal", signal},
               {"delay_s", absl::ToDoubleSeconds(delay)},
               {"open_connections", active_sessions_.load()}});
    asio::steady_timer timer(main_ioc_);
    timer.expires_after(absl::ToChronoMilliseconds(delay));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  BeginShutdown(signal);
}

}  // namespace kf
