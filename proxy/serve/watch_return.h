// A watch of a cached kind that passes through for a reason that passes: its review said no
// while the apiserver's authorizer may already say yes (a node's watch of a ConfigMap its
// just-bound pod uses, before the Node authorizer's graph has the pod; the denial is then kept
// for --authorization-webhook-cache-unauthorized-ttl). As the client sent it, such a watch
// would stay at the apiserver for the client's timeout (client-go: 5-10 minutes; none given:
// the apiserver's 30-60). Sent upstream with a shorter timeoutSeconds, the apiserver ends it
// cleanly by then, and the client resumes from its last RV, this time from the cache if its
// review now says yes.
#ifndef KUBE_FANOUT_SERVE_WATCH_RETURN_H_
#define KUBE_FANOUT_SERVE_WATCH_RETURN_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kf {

// `target` with timeoutSeconds at most `cap`: appended when absent, lowered when larger or 0
// (the apiserver's "its own default"). nullopt (send it as it is) when it ends by then already,
// or when its timeoutSeconds is not one plain `timeoutSeconds=` parameter (several, or an
// escaped name, or a value that does not parse: the apiserver answers those as they are).
std::optional<std::string> CappedWatchTarget(std::string_view target, std::chrono::seconds cap);

// How long a watch passed through for a passing reason may stay upstream: twice the negative
// review TTL (a review after it expires can say yes), at least 5 s.
std::chrono::seconds WatchReturnCap(std::chrono::seconds negative_review_ttl);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WATCH_RETURN_H_
