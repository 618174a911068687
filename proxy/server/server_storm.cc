// Server::StormLogLoop: what an overloaded kube-fanout refuses, in its log. Each refusal is
// counted where it happens (the metrics StormCauseMetric names); once a second their totals go
// through a StormEpisode, which says when to write a line: a warning when refusals begin after
// 10 s without any, a summary every 30 s while they last, and one when they have stopped, each
// with the counts by cause since they began. A storm of any size writes a few lines, not one
// per connection.
#include <boost/asio/steady_timer.hpp>

#include "common/use_nothrow.h"
#include "proxy/server/server.h"

namespace kf {

asio::awaitable<void> Server::StormLogLoop() {
  asio::steady_timer timer(main_ioc_);
  StormEpisode episode;
  while (!shutting_down_) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(use_nothrow);
    if (auto line = episode.Observe(std::chrono::steady_clock::now(), StormTotals())) {
      LogStormLine(*line);
    }
  }
}

StormCounts Server::StormTotals() const {
  auto refused = [this](Refusal why) {
    return route_stats_.refused[static_cast<size_t>(why)].load(std::memory_order_relaxed);
  };
  uint64_t admission_rejected = 0;
  if (admission_) {
    for (const auto& [schema, stats] : admission_->SchemaStatsSnapshot()) {
      for (const auto& [reason, n] : stats.rejected) admission_rejected += n;
    }
  }
  StormCounts c{};
  auto set = [&c](StormCause cause, uint64_t n) { c[static_cast<size_t>(cause)] = n; };
  set(StormCause::kTlsHandshakeTimeout, route_stats_.transport.tls_handshake_timeouts.load());
  set(StormCause::kHandshakeQueue, refused(Refusal::kHandshakeQueue));
  set(StormCause::kFdHeadroom, connections_refused_[0].load());
  set(StormCause::kTokenReviewUnavailable, refused(Refusal::kTokenReviewUnavailable));
  set(StormCause::kAccessReviewUnavailable, refused(Refusal::kAccessReviewUnavailable));
  set(StormCause::kTokenReviewThrottled, refused(Refusal::kTokenReviewThrottled));
  set(StormCause::kAdmissionRejected, admission_rejected);
  set(StormCause::kPassthroughRejected, in_flight_cap_ ? in_flight_cap_->rejected() : 0);
  return c;
}

void Server::LogStormLine(const StormEpisode::Line& line) const {
  std::string_view msg;
  switch (line.phase) {
    case StormEpisode::Phase::kBegan:
      msg = "overload began: refusing connections or requests";
      break;
    case StormEpisode::Phase::kLasting:
      msg = "overload continues (counts since it began)";
      break;
    case StormEpisode::Phase::kEnded:
      msg = "overload ended: 10 s without a refusal (counts since it began)";
      break;
  }
  static_assert(kStormCauses == 8, "a new cause needs its field here");
  auto n = [&line](StormCause cause) {
    return LogField(StormCauseName(cause), line.counts[static_cast<size_t>(cause)]);
  };
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(line.lasted).count();
  log_.Warning(msg, {{"episode_seconds", static_cast<int64_t>(seconds)},
                     n(StormCause::kTlsHandshakeTimeout),
                     n(StormCause::kHandshakeQueue),
                     n(StormCause::kFdHeadroom),
                     n(StormCause::kTokenReviewUnavailable),
                     n(StormCause::kAccessReviewUnavailable),
                     n(StormCause::kTokenReviewThrottled),
                     n(StormCause::kAdmissionRejected),
                     n(StormCause::kPassthroughRejected)});
}

}  // namespace kf
