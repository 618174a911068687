// LongRunningCap: passthrough watches and tunnels (exec, attach, port-forward) each hold an
// upstream connection of their own for as long as they run (hours), so they are counted: at
// most --max-passthrough-watches open at once, and --max-passthrough-watches-per-user per
// identity, the exempt priority level aside (as --max-passthrough-in-flight). Past either
// bound: 429 TooManyRequests with Retry-After: 1 and a Status body, as a cached watch past
// --max-watchers; the client's reflector backs off and watches again.
//
// An identity is the user the identity filter learnt, plus the pod a bound ServiceAccount token
// was issued to (its authentication.kubernetes.io/pod-uid extra): the pods of one DaemonSet
// share a user name but each get their own budget. Anonymous requests share one; requests whose
// user is not known (not reviewed) are counted by source address.
//
// Shared by every worker; WatchSlots is thread-safe.
#ifndef KUBE_FANOUT_FILTERS_LONG_RUNNING_CAP_H_
#define KUBE_FANOUT_FILTERS_LONG_RUNNING_CAP_H_

#include <string>

#include "proxy/edge/filter.h"
#include "ratelimit/watch_slots.h"

namespace kf {

class LongRunningCap : public Filter {
 public:
  explicit LongRunningCap(WatchSlots& slots) : slots_(slots) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

  // The budget a request is counted in.
  static std::string IdentityKey(const Exchange& x);

 private:
  WatchSlots& slots_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_LONG_RUNNING_CAP_H_
