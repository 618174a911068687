// PassReason: why a read of a cached kind passes through to the apiserver (Decide, decision.h),
// for the request's counters (CacheServeStats::passed, kube_fanout_cache_passed_through_total).
#ifndef KUBE_FANOUT_SERVE_PASS_REASON_H_
#define KUBE_FANOUT_SERVE_PASS_REASON_H_

#include <cstddef>
#include <string_view>

namespace kf {

// Why a read of a cached kind passes through (the apiserver answers).
enum class PassReason {
  kNone,
  kNotCacheable,    // A query form the apiserver words its own answer for.
  kNotCached,       // No cache for the kind, or it did not start in time.
  kRepresentation,  // An encoding or conversion only the apiserver renders.
  kNotSynced,       // The cache has not synced, and the apiserver would read etcd.
  kSelector,        // Selectors the apiserver refuses, or a shard selector not known yet.
  kUnknownUser,     // No user: no credentials, or ones the apiserver does not accept.
  kDenied,          // The SubjectAccessReview said no (or refused kube-fanout).
  kConsistentTurn,  // A consistent read's turn upstream, or a GET within its budget (flags.cc).
  kUnprovable,      // The upstream cannot prove the cache current (RequiredVersion).
  // Not Decide's: the cache found, as it answered, that it cannot answer exactly (a GET at
  // resourceVersion 0 of an object it does not hold, a LIST at a resourceVersion that has left
  // its window, a WATCH from a resourceVersion it cannot promise).
  kServeDeclined,
  kCount
};
std::string_view PassReasonName(PassReason reason);
inline constexpr size_t kPassReasons = static_cast<size_t>(PassReason::kCount);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_PASS_REASON_H_
