// The metric families of the cache's request side (proxy/serve/serve_stats.h).
#ifndef KUBE_FANOUT_SERVER_SERVE_METRICS_H_
#define KUBE_FANOUT_SERVER_SERVE_METRICS_H_

#include "proxy/serve/serve_stats.h"
#include "proxy/server/metrics_writer.h"

namespace kf {

void RenderServeMetrics(metrics::Writer& w, const CacheServeStats& serve);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_SERVE_METRICS_H_
