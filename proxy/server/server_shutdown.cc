// The graceful stop, in the apiserver's three phases and with its flags' names:
// - --shutdown-delay-duration (ShutdownAfterDelay): /readyz fails while every listener keeps
//   accepting and every request is served as before, so a Service (EndpointSlice, kube-proxy) or
//   a load balancer takes the replica out of rotation before its listeners close;
// - --shutdown-watch-termination-grace-period (SpreadWatchTermination): the listeners closed,
//   the connections open then are ended a share at a time over that period, the caches still
//   running for those not ended yet, so their clients come back to the other replicas at a
//   bounded rate instead of all in the same second;
// - --shutdown-grace-period (Drain): what is left is ended at once and given that long.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "proxy/server/server.h"

namespace kf {
namespace {

// How often a spread ends its next share of connections.
constexpr auto kSpreadTick = std::chrono::milliseconds(50);

}  // namespace

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

void Server::BeginShutdown(int signal) {
  shutting_down_ = true;
  health_.SetShuttingDown();
  const absl::Duration spread = options_.shutdown_watch_termination_grace_period;
  log_.Info("shutting down",
            {{"signal", signal},
             {"watch_termination_grace_period_s", absl::ToDoubleSeconds(spread)},
             {"grace_period_s", absl::ToDoubleSeconds(options_.shutdown_grace_period)},
             {"open_connections", active_sessions_.load()}});
  beast::error_code ignored;
  plain_acceptor_.close(ignored);
  tls_acceptor_.close(ignored);
  metrics_acceptor_.close(ignored);
  if (spread > absl::ZeroDuration()) {
    asio::co_spawn(main_ioc_, SpreadWatchTermination(absl::ToChronoMilliseconds(spread)),
                   asio::detached);
    return;
  }
  StopCacheAndSessions();
  asio::co_spawn(main_ioc_, Drain(), asio::detached);
}

void Server::StopCacheAndSessions() {
  if (cache_) cache_->Stop();
  for (auto& w : workers_) {
    asio::post(w->ioc(), [worker = w.get()] { worker->sessions().StopAll(); });
  }
}

asio::awaitable<void> Server::SpreadWatchTermination(std::chrono::milliseconds period) {
  for (auto& w : workers_) {
    asio::post(w->ioc(), [worker = w.get()] { worker->sessions().BeginSpread(); });
  }
  const auto start = std::chrono::steady_clock::now();
  asio::steady_timer timer(main_ioc_);
  for (;;) {
    const auto elapsed = std::chrono::steady_clock::now() - start;
    const double share = std::min(1.0, std::chrono::duration<double>(elapsed) / period);
    for (auto& w : workers_) {
      asio::post(w->ioc(), [worker = w.get(), share] { worker->sessions().StopShare(share); });
    }
    if (share >= 1.0 || active_sessions_.load() == 0) break;
    timer.expires_after(kSpreadTick);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  log_.Info("watch termination grace period over", {{"open_connections", active_sessions_.load()}});
  StopCacheAndSessions();
  co_await Drain();
}

asio::awaitable<void> Server::Drain() {
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.shutdown_grace_period));
  asio::steady_timer timer(main_ioc_);
  while (active_sessions_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    // Sessions accepted during the signal race are stopped too.
    for (auto& w : workers_) {
      asio::post(w->ioc(), [worker = w.get()] { worker->sessions().StopAll(); });
    }
  }
  const int64_t left = active_sessions_.load();
  if (left > 0)
    log_.Warning("grace period over, closing connections", {{"open_connections", left}});
  for (auto& w : workers_) {
    // A permission check still waiting for an apiserver that does not answer is abandoned.
    if (left > 0 || (w == workers_.back() && !delegation_checked_)) {
      w->StopNow();
    } else {
      w->Release();
    }
  }
}

}  // namespace kf
