// Metrics: kube-fanout's /metrics in the Prometheus text format (version 0.0.4), rendered on
// demand from the counters each component keeps (no global registry). Each component renders its
// own families beside its stats (proxy/serve/serve_metrics.h, proxy/sync/sync_metrics.h,
// proxy/upstream/upstream_metrics.h, ratelimit/ratelimit_metrics.h, ...); the server lists them
// (Server::MetricsRenderers) and RenderMetrics runs the list.
#ifndef KUBE_FANOUT_SERVER_METRICS_H_
#define KUBE_FANOUT_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/metrics_writer.h"

namespace kf {

// One component's families, written with the component's current counters.
using MetricsRenderer = std::function<void(metrics::Writer&)>;

// The exposition: each renderer's families, in the list's order.
std::string RenderMetrics(const std::vector<MetricsRenderer>& renderers);

// New connections refused at accept: descriptor headroom, failed accepts; TLS accept pauses.
void RenderConnectionsRefusedMetrics(metrics::Writer& w, uint64_t fd_headroom,
                                     uint64_t accept_errors, uint64_t accept_pauses);

// --secure-listen's certificate: reloads, rejected new files, the served one's expiry.
void RenderServingCertificateMetrics(metrics::Writer& w, uint64_t reloads, uint64_t failures,
                                     int64_t not_after);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_METRICS_H_
