// EventSpamGate: Event creations of an authenticated user pass ratelimit::EventSpamFilter
// first: the body is read whole (bounded as the apiserver bounds request bodies, 3 MiB),
// judged against that user's buckets, then relayed as read. Unauthenticated ones go straight
// to the apiserver, which refuses them; their bodies are never looked at.
//
// Shared by every worker; EventSpamFilter is thread-safe.
#ifndef KUBE_FANOUT_FILTERS_EVENT_SPAM_GATE_H_
#define KUBE_FANOUT_FILTERS_EVENT_SPAM_GATE_H_

#include "proxy/edge/filter.h"
#include "ratelimit/event_filter.h"

namespace kf {

class EventSpamGate : public Filter {
 public:
  explicit EventSpamGate(ratelimit::EventSpamFilter& filter) : filter_(filter) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

 private:
  ratelimit::EventSpamFilter& filter_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_EVENT_SPAM_GATE_H_
