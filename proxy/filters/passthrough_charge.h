// PassthroughCharge: the rest of the price of a read that admission let in at the cache's price
// (AdmissionFilter: a GET or LIST routed to the cache, its schema's cachedReadRateLimit) and that
// the cache declined (a form it does not answer, a consistent read sent upstream, a user the
// apiserver must judge): before it is relayed, it pays its flow's passthrough rateLimit
// (ratelimit::Admission::ChargePassthrough). Past it: 429 with Retry-After, as admission answers.
// It is not queued again: its seat is already held. Every other request goes on untouched.
//
// Shared by every worker; Admission is thread-safe.
#ifndef KUBE_FANOUT_FILTERS_PASSTHROUGH_CHARGE_H_
#define KUBE_FANOUT_FILTERS_PASSTHROUGH_CHARGE_H_

#include "proxy/edge/filter.h"
#include "ratelimit/admission.h"

namespace kf {

class PassthroughCharge : public Filter {
 public:
  explicit PassthroughCharge(ratelimit::Admission& admission) : admission_(admission) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

 private:
  ratelimit::Admission& admission_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_PASSTHROUGH_CHARGE_H_
