// The rate limits' metric families: admission by flow schema and priority level (names follow
// the apiserver's apiserver_flowcontrol_* families), the Event spam filter's verdicts.
#ifndef KUBE_FANOUT_RATELIMIT_RATELIMIT_METRICS_H_
#define KUBE_FANOUT_RATELIMIT_RATELIMIT_METRICS_H_

#include "common/metrics_writer.h"
#include "ratelimit/admission.h"
#include "ratelimit/event_filter.h"

namespace kf {

namespace ratelimit {

void RenderAdmissionMetrics(metrics::Writer& w, const Admission& admission);

// Event creations refused and let through by the spam filter.
void RenderEventSpamMetrics(metrics::Writer& w, const EventSpamFilter& filter);

}  // namespace ratelimit

}  // namespace kf

#endif  // KUBE_FANOUT_RATELIMIT_RATELIMIT_METRICS_H_
