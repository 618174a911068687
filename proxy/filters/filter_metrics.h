// The filters' metric families (in_flight_cap.h).
#ifndef KUBE_FANOUT_FILTERS_FILTER_METRICS_H_
#define KUBE_FANOUT_FILTERS_FILTER_METRICS_H_

#include <cstdint>

#include "common/metrics_writer.h"

namespace kf {

// Passthrough requests in flight and refused by --max-passthrough-in-flight (InFlightCap).
void RenderInFlightCapMetrics(metrics::Writer& w, int64_t in_flight, uint64_t rejected);

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_FILTER_METRICS_H_
