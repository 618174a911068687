// ReviewStats: what the authentication and authorization caches did, for /metrics. Shared by
// every worker's cache (atomics, relaxed: counters only).
#ifndef KUBE_FANOUT_UPSTREAM_REVIEW_STATS_H_
#define KUBE_FANOUT_UPSTREAM_REVIEW_STATS_H_

#include <atomic>
#include <cstdint>

namespace kf {

struct ReviewStats {
  std::atomic<uint64_t> cache_hits{0};  // Answered from the cache, no review sent.
  std::atomic<uint64_t> allowed{0};     // Reviews sent: authenticated / allowed.
  std::atomic<uint64_t> denied{0};      // Reviews sent: not authenticated / denied.
  std::atomic<uint64_t> errors{0};      // Reviews sent without an answer (unreachable, 5xx, 403).
  std::atomic<uint64_t> throttled{0};   // Reviews not sent: the budget for new ones was spent.
  std::atomic<uint64_t> shared{0};      // Nodes allowed by their question's shape (node_shape.h).

  void Count(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_REVIEW_STATS_H_
