#include "proxy/filters/filter_metrics.h"

namespace kf {

void RenderInFlightCapMetrics(metrics::Writer& w, int64_t in_flight, uint64_t rejected) {
  w.Single("kube_fanout_passthrough_in_flight", "gauge",
           "Passthrough requests (not watches) in flight to the upstream.",
           static_cast<double>(in_flight));
  w.Single("kube_fanout_passthrough_rejected_total", "counter",
           "Passthrough requests answered 429 because --max-passthrough-in-flight were in flight.",
           static_cast<double>(rejected));
}

}  // namespace kf
