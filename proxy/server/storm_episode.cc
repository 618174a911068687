#include "proxy/server/storm_episode.h"

namespace kf {

namespace {

struct CauseText {
  std::string_view name, metric;
};

constexpr std::array<CauseText, kStormCauses> kCauseText = {{
    {"tls_handshake_timeout", "kube_fanout_tls_handshake_timeouts_total"},
    {"handshake_queue", "kube_fanout_requests_refused_total{reason=\"handshake_queue\"}"},
    {"fd_headroom", "kube_fanout_connections_refused_total{reason=\"fd_headroom\"}"},
    {"token_review_unavailable",
     "kube_fanout_requests_refused_total{reason=\"token_review_unavailable\"}"},
    {"access_review_unavailable",
     "kube_fanout_requests_refused_total{reason=\"access_review_unavailable\"}"},
    {"token_review_throttled",
     "kube_fanout_requests_refused_total{reason=\"token_review_throttled\"}"},
    {"admission_rejected", "kube_fanout_admission_rejected_requests_total (summed)"},
    {"passthrough_rejected", "kube_fanout_passthrough_rejected_total"},
}};

}  // namespace

std::string_view StormCauseName(StormCause cause) {
  return kCauseText[static_cast<size_t>(cause)].name;
}

std::string_view StormCauseMetric(StormCause cause) {
  return kCauseText[static_cast<size_t>(cause)].metric;
}

std::optional<StormEpisode::Line> StormEpisode::Observe(Clock::time_point now,
                                                        const StormCounts& totals) {
  StormCounts delta{};
  bool refused = false;
  for (size_t i = 0; i < kStormCauses; ++i) {
    delta[i] = totals[i] > last_[i] ? totals[i] - last_[i] : 0;
    last_[i] = totals[i];
    refused = refused || delta[i] != 0;
  }
  if (!in_episode_) {
    if (!refused) return std::nullopt;
    in_episode_ = true;
    counts_ = delta;
    began_ = last_refusal_ = last_line_ = now;
    return Line{Phase::kBegan, counts_, Clock::duration::zero()};
  }
  for (size_t i = 0; i < kStormCauses; ++i) counts_[i] += delta[i];
  if (refused) last_refusal_ = now;
  if (now - last_refusal_ >= options_.quiet) {
    in_episode_ = false;
    return Line{Phase::kEnded, counts_, last_refusal_ - began_};
  }
  if (refused && now - last_line_ >= options_.summary_every) {
    last_line_ = now;
    return Line{Phase::kLasting, counts_, now - began_};
  }
  return std::nullopt;
}

}  // namespace kf
