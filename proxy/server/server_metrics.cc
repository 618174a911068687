// Server::MetricsRenderers: what /metrics shows, each component's families in order.
#include "proxy/filters/filter_metrics.h"
#include "proxy/passthrough/passthrough_metrics.h"
#include "proxy/serve/serve_metrics.h"
#include "proxy/server/metrics.h"
#include "proxy/server/process_metrics.h"
#include "proxy/server/server.h"
#include "proxy/server/transport_metrics.h"
#include "proxy/sync/sync_metrics.h"
#include "proxy/upstream/upstream_metrics.h"
#include "ratelimit/ratelimit_metrics.h"

namespace kf {

std::vector<MetricsRenderer> Server::MetricsRenderers() const {
  using metrics::Writer;
  std::vector<MetricsRenderer> r = {
      [this](Writer& w) { RenderRouteMetrics(w, route_stats_, active_sessions_.load()); },
      [this](Writer& w) { RenderServeMetrics(w, cache_stats_); },
      [this](Writer& w) { RenderWatchWriteMetrics(w, cache_stats_); },
  };
  if (cache_) r.push_back([this](Writer& w) { RenderCacheMetrics(w, *cache_); });
  if (admission_) {
    r.push_back([this](Writer& w) {
      ratelimit::RenderAdmissionMetrics(w, *admission_);
      RenderInFlightCapMetrics(w, in_flight_cap_ ? in_flight_cap_->in_flight() : 0,
                               in_flight_cap_ ? in_flight_cap_->rejected() : 0);
    });
  }
  if (coalescer_) r.push_back([this](Writer& w) { RenderCoalescerMetrics(w, *coalescer_); });
  if (event_filter_) {
    r.push_back([this](Writer& w) { ratelimit::RenderEventSpamMetrics(w, *event_filter_); });
  }
  r.push_back(
      [this](Writer& w) { RenderReviewMetrics(w, authentication_stats_, authorization_stats_); });
  if (serving_cert_) {
    r.push_back([this](Writer& w) {
      RenderServingCertificateMetrics(w, serving_cert_->reloads(), serving_cert_->reload_failures(),
                                      serving_cert_->not_after());
    });
  }
  r.push_back([this](Writer& w) {
    RenderWatchLimitMetrics(w, watch_queue_budget_, watch_slots_, passthrough_slots_);
    RenderListGzipMetrics(w, list_gzip_.GetStats());
    RenderUpstreamPoolMetrics(w, upstream_pool_stats_);
    RenderConnectionsRefusedMetrics(w, connections_refused_[0].load(),
                                    connections_refused_[1].load(), accept_paused_.load());
  });
  r.push_back([this](Writer& w) { heap_trimmer_.Render(w); });
  r.push_back(RenderProcessMetrics);
  return r;
}

}  // namespace kf
