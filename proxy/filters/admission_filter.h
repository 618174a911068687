// AdmissionFilter: ratelimit::Admission's verdict for a request (fair queues per priority
// level, token buckets for polling flows). Refused: 429 with Retry-After, as the apiserver's
// APF answers. Admitted: the seat is held while the request runs (a watch holds it only while
// it starts, as APF counts watches), and the priority level and flow are noted for later steps.
// A GET or LIST routed to the cache is admitted at the cache's price; if the cache declines it,
// PassthroughCharge (passthrough_charge.h) makes it pay the passthrough price before the relay.
// The flows of a ByUser schema tell the pods of one ServiceAccount apart by the node (else the
// pod) their bound token names, so a DaemonSet's pods do not share one budget.
//
// Shared by every worker; Admission is thread-safe.
#ifndef KUBE_FANOUT_FILTERS_ADMISSION_FILTER_H_
#define KUBE_FANOUT_FILTERS_ADMISSION_FILTER_H_

#include "proxy/edge/filter.h"
#include "ratelimit/admission.h"

namespace kf {

class AdmissionFilter : public Filter {
 public:
  explicit AdmissionFilter(ratelimit::Admission& admission) : admission_(admission) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

  // What admission classifies a request by.
  static ratelimit::RequestAttributes Attributes(const Exchange& x);
  // What a pod-bound ServiceAccount token's user names ("node/NAME", else "pod/NAME"; "": not
  // one): RequestAttributes::bound_to.
  static std::string BoundTo(const Identity& user);
  // The 429 for a refused decision, with its Retry-After.
  static asio::awaitable<void> Refuse(Exchange& x, const ratelimit::Decision& refused);

 private:
  asio::awaitable<ratelimit::Decision> Decide(const ratelimit::RequestAttributes& a);
  // False: refused (answered). Admitted: `seat` holds the request's seat (none for a watch).
  asio::awaitable<bool> Admit(Exchange& x, ratelimit::Seat* seat);

  ratelimit::Admission& admission_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_ADMISSION_FILTER_H_
