// AccessReview: may this user read that from the cache? Cached data is served only to those the
// apiserver would serve it to. kube-fanout asks the apiserver with a SubjectAccessReview
// (authorization.k8s.io/v1, made with its own credentials: system:auth-delegator) for the user
// the request authenticated as (identity.h) and the request's attributes as the apiserver's
// authorizer sees them: verb, group, version, resource, namespace, name, and for list and watch
// the request's field and label selectors (the Node authorizer lets a kubelet list only its own
// pods, by spec.nodeName). Answers are cached per user and attributes, as the apiserver's
// webhook authorizer caches (--authorization-webhook-cache-authorized-ttl / -unauthorized-ttl),
// so N agents of one user cost one review per distinct request shape. A denied, unknown or
// failed review sends the request through to the apiserver, which gives its own exact answer
// (403, ...): a failure never serves from the cache.
//
// One per worker thread; not thread-safe. Bounded.
#ifndef KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_
#define KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_

#include <chrono>
#include <functional>
#include <string>

#include "common/expiring_cache.h"
#include "common/single_flight.h"
#include "edge/request_info.h"
#include "upstream/identity.h"
#include "upstream/review_stats.h"
#include "upstream/upstream_pool.h"

namespace kf {

// What a review asks about: the authorizer's resource attributes.
struct AccessAttributes {
  std::string verb, group, version, resource, namespace_, name;
  std::string field_selector, label_selector;  // Raw, as the request's query gave them.

  // The request's attributes (selectors for list and watch only, as the apiserver's).
  static AccessAttributes Of(const RequestInfo& info);
  // The same verb on the whole resource: every namespace and name, no selectors.
  AccessAttributes WholeResource() const;
  bool IsWholeResource() const;
};

class AccessReview {
 public:
  // `in_flight`: bounds the reviews this thread has on their way to the apiserver.
  AccessReview(CacheSettings settings, ReviewStats& stats, AsyncSemaphore& in_flight,
               std::function<std::string()> own_authorization)
      : settings_(settings),
        stats_(stats),
        in_flight_(in_flight),
        own_authorization_(std::move(own_authorization)),
        entries_(settings.max_entries) {}

  // True when the apiserver says `user` may do `info`'s verb on what it names. False on
  // denial or error. `own_pool` is a pool of kube-fanout's own connections.
  asio::awaitable<bool> Allowed(UpstreamPool& own_pool, const UserInfo& user,
                                const RequestInfo& info);

  // The SubjectAccessReview body.
  static std::string ReviewBody(const UserInfo& user, const AccessAttributes& attrs);

 private:
  asio::awaitable<bool> Check(UpstreamPool& pool, const UserInfo& user,
                              const AccessAttributes& attrs);
  asio::awaitable<bool> Review(UpstreamPool& pool, const UserInfo& user,
                               const AccessAttributes& attrs, const std::string& key);

  CacheSettings settings_;
  ReviewStats& stats_;
  AsyncSemaphore& in_flight_;
  std::function<std::string()> own_authorization_;
  ExpiringCache<bool> entries_;
  SingleFlight<bool> flights_;  // Reviews on their way, shared by identical ones.
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_
