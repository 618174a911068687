#include "proxy/passthrough/passthrough_metrics.h"

namespace kf {

void RenderCoalescerMetrics(metrics::Writer& w, const Coalescer& coalescer) {
  w.Single("kube_fanout_passthrough_coalesced_total", "counter",
           "Passthrough reads answered with an identical concurrent request's upstream "
           "response.",
           static_cast<double>(coalescer.coalesced()));
}

}  // namespace kf
