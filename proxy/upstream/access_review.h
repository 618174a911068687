// AccessReview: may this user read that from the cache? Cached data is served only to those the
// apiserver would serve it to. kube-fanout asks the apiserver with a SubjectAccessReview
// (authorization.k8s.io/v1, made with its own credentials: system:auth-delegator) for the user
// the request authenticated as (identity.h) and the request's attributes as the apiserver's
// authorizer sees them: verb, group, version, resource, namespace, name, and for list and watch
// the request's field and label selectors (the Node authorizer lets a kubelet list only its own
// pods, by spec.nodeName). Answers are cached per user and attributes, as the apiserver's
// webhook authorizer caches (--authorization-webhook-cache-authorized-ttl / -unauthorized-ttl),
// so N agents of one user cost one review per distinct request shape, whichever worker thread
// they reach (access_answers.h: the answers and the reviews in flight are shared). A node's
// question is asked once for all nodes where the apiserver's answer cannot depend on which node
// asks (node_shape.h): for a probe node in the node's groups, whose yes is every such node's.
// The key holds how the user was vouched for too (token, certificate, front proxy): answers never
// cross trust levels. A denied review, or one the apiserver refused kube-fanout (401, 403: no
// system:auth-delegator), sends the request through to the apiserver, which gives its own exact
// answer (403, ...). A review that got no answer in time (review_call.h: the upstream unreachable
// or overloaded, past its 10 s, too many waiting) is unavailable: the cached read is answered 429
// (proxy/serve/cache_handler.h), so an overload of kube-fanout does not become one of the
// apiserver. No failure serves from the cache.
//
// One per worker thread (its pool and review slots); not thread-safe. The answers are shared
// (AccessAnswers, thread-safe, bounded).
#ifndef KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_
#define KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_

#include <chrono>
#include <functional>
#include <string>

#include "common/api/request_info.h"
#include "proxy/upstream/access_answers.h"
#include "proxy/upstream/access_attributes.h"
#include "proxy/upstream/identity.h"
#include "proxy/upstream/review_call.h"
#include "proxy/upstream/review_stats.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

class AccessReview {
 public:
  // `slots`: bounds the reviews this thread has on their way to the apiserver. `answers`: the
  // answers every thread shares (and the probe node, when node reviews are shared).
  AccessReview(CacheSettings settings, ReviewStats& stats, ReviewSlots& slots,
               std::function<std::string()> own_authorization, AccessAnswers& answers)
      : settings_(settings),
        stats_(stats),
        slots_(slots),
        own_authorization_(std::move(own_authorization)),
        answers_(answers) {}

  // How long a denial is kept (--authorization-webhook-cache-unauthorized-ttl).
  std::chrono::seconds negative_ttl() const { return settings_.negative_ttl; }

  // kAllowed when the apiserver says `user` (vouched for `by`: Authentication::by) may do
  // `info`'s verb on what it names. `own_pool` is a pool of kube-fanout's own connections.
  asio::awaitable<Access> Allowed(UpstreamPool& own_pool, Vouched::By by, const UserInfo& user,
                                  const RequestInfo& info);

  // kAllowed when the apiserver says `user` may `verb` the non-resource URL `path` (RBAC's
  // nonResourceURLs: what the apiserver asks before it serves its own /metrics).
  asio::awaitable<Access> AllowedPath(UpstreamPool& own_pool, Vouched::By by, const UserInfo& user,
                                      std::string_view verb, std::string_view path);

  // The SubjectAccessReview body.
  static std::string ReviewBody(const UserInfo& user, const AccessAttributes& attrs);

  // What an answer is cached under: the identity as vouched and how (vouched.h's IdentityKey),
  // then every attribute, length-prefixed. Equal only for equal inputs.
  static std::string CacheKey(Vouched::By by, const UserInfo& user, const AccessAttributes& attrs);

 private:
  // A node's answer from its question's shape (node_shape.h), asked for the probe node: its yes
  // (or no answer at all); nullopt when not shared (not a node, no shape, the probe denied).
  asio::awaitable<std::optional<Access>> SharedByNodes(UpstreamPool& pool, Vouched::By by,
                                                       const UserInfo& user,
                                                       const AccessAttributes& attrs);
  asio::awaitable<Access> Check(UpstreamPool& pool, Vouched::By by, const UserInfo& user,
                                const AccessAttributes& attrs);
  asio::awaitable<Access> Review(UpstreamPool& pool, const UserInfo& user,
                                 const AccessAttributes& attrs, const std::string& key);

  CacheSettings settings_;
  ReviewStats& stats_;
  ReviewSlots& slots_;
  std::function<std::string()> own_authorization_;
  AccessAnswers& answers_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_ACCESS_REVIEW_H_
