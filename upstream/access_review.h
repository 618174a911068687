// AccessReview: may this client read that from the cache? Cached data is served only to those
// the apiserver would serve it to. kube-fanout asks the apiserver itself, with the client's own
// credentials, through a SelfSubjectAccessReview (no TokenReview needed, no identity of ours
// involved), and remembers the answer briefly, as the apiserver's webhook authorizer caches.
// An unknown or negative answer sends the request through to the apiserver, which then gives
// its own exact answer (403, 401, ...).
//
// One per worker thread; not thread-safe. Bounded.
#ifndef KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_
#define KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_

#include <chrono>
#include <string>

#include "common/expiring_cache.h"
#include "common/single_flight.h"
#include "edge/request_info.h"
#include "upstream/upstream_pool.h"

namespace kf {

class AccessReview {
 public:
  AccessReview(std::chrono::seconds allowed_ttl, std::chrono::seconds denied_ttl,
               size_t max_entries)
      : allowed_ttl_(allowed_ttl), denied_ttl_(denied_ttl), entries_(max_entries) {}

  // True when the apiserver says the holder of `authorization` may do `info`'s verb on its
  // resource (namespace, name). False on denial, error, or no credentials.
  asio::awaitable<bool> Allowed(UpstreamPool& pool, const std::string& authorization,
                                const RequestInfo& info);

  uint64_t reviews() const { return reviews_; }

  // The SelfSubjectAccessReview body for `info`'s verb and resource, in `ns`, on `name`.
  static std::string ReviewBody(const RequestInfo& info, const std::string& ns,
                                const std::string& name);

 private:
  asio::awaitable<bool> Check(UpstreamPool& pool, const std::string& authorization,
                              const RequestInfo& info, bool whole_resource);
  asio::awaitable<bool> Review(UpstreamPool& pool, const std::string& authorization,
                               const RequestInfo& info, const std::string& ns,
                               const std::string& name, const std::string& key);

  std::chrono::seconds allowed_ttl_, denied_ttl_;
  ExpiringCache<bool> entries_;
  SingleFlight<bool> flights_;  // Reviews on their way, shared by identical ones.
  uint64_t reviews_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_
