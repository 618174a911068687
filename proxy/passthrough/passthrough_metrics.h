// The passthrough's metric families (coalescer.h).
#ifndef KUBE_FANOUT_PASSTHROUGH_PASSTHROUGH_METRICS_H_
#define KUBE_FANOUT_PASSTHROUGH_PASSTHROUGH_METRICS_H_

#include "common/metrics_writer.h"
#include "proxy/passthrough/coalescer.h"

namespace kf {

// Passthrough reads answered with an identical concurrent request's upstream response.
void RenderCoalescerMetrics(metrics::Writer& w, const Coalescer& coalescer);

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_PASSTHROUGH_METRICS_H_
