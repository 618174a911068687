// The client side's metric families: requests by how they were answered or refused, and the
// transport's connections and HTTP/2 streams (the counters proxy/edge/exchange.h keeps).
#ifndef KUBE_FANOUT_SERVER_TRANSPORT_METRICS_H_
#define KUBE_FANOUT_SERVER_TRANSPORT_METRICS_H_

#include <cstdint>

#include "common/metrics_writer.h"
#include "proxy/edge/exchange.h"

namespace kf {

void RenderRouteMetrics(metrics::Writer& w, const RouteStats& routes, int64_t open_connections);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_TRANSPORT_METRICS_H_
