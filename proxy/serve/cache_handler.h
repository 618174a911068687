// CacheHandler: answers LIST, GET and WATCH of a cached resource from its Cacher with the
// apiserver's semantics and wire format, after the apiserver has confirmed who the client is
// (Authenticator: its verified client certificate or a TokenReview) and that this user may make
// this request, selectors included (AccessReview: a SubjectAccessReview). What it cannot answer
// exactly, or for an unknown or refused client, it declines (Serve returns false, nothing
// written) and the request passes through, for the apiserver's own answer.
//
// When either review got no answer in time (proxy/upstream/review_call.h: the upstream unreachable
// or overloaded, the review past its 10 s, too many reviews waiting), the read is answered as the
// apiserver answers when overloaded, 429 TooManyRequests with Retry-After: 1 and a Status body,
// and counted (kube_fanout_requests_refused_total{reason="token_review_unavailable" or
// "access_review_unavailable"}): passing it through would turn an overload of kube-fanout into
// one of the apiserver. So is a read whose new token was not reviewed because the budget for
// new TokenReviews was spent (--authentication-token-review-qps; reason
// "token_review_throttled"): a flood of made-up tokens must not become a flood of reads at the
// apiserver. A denial, or a review the apiserver refused kube-fanout (401, 403: no
// system:auth-delegator), still passes through: the apiserver answered, and serving the request
// itself is the only way left.
//
// What to do is Decide's (decision.h, pure); Serve learns the facts it asks for, one step at a
// time, and acts on its answer:
//
//   Decide ─► learn: FindCache, WaitSynced, Select (FilterFor), Authenticate, ReviewAccess,
//     │              TakeWatchSlot, TakeConsistentTurn, RequireVersion ─► Decide again
//     ├─► serve:  watch: ServeWatch; get: WriteObject; list: WriteList
//     ├─► pass:   false (counted by PassReason; a watch perhaps sent back, watch_return.h)
//     └─► refuse: the Status of its RefuseReason
//
// One per worker thread (the pool, the review caches, the Wakeups and the bound on the LISTs in
// the list pool are that thread's).
#ifndef KUBE_FANOUT_SERVE_CACHE_HANDLER_H_
#define KUBE_FANOUT_SERVE_CACHE_HANDLER_H_

#include "proxy/edge/filter.h"
#include "proxy/serve/decision.h"
#include "proxy/serve/list_pool.h"
#include "proxy/serve/list_response.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/serve/wakeups.h"
#include "proxy/serve/watch_stream.h"
#include "proxy/sync/cached_resources.h"
#include "proxy/upstream/access_review.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

class CacheHandler : public Handler {
 public:
  // `own_pool`: kube-fanout's own connections, for the reviews.
  // `routes` (optional): where refusals are counted.
  CacheHandler(const CachedResources& cache, UpstreamPool& own_pool, Authenticator& authn,
               AccessReview& access, Wakeups& wakeups, CacheServeStats& stats, WatchOptions options,
               RouteStats* routes = nullptr)
      : cache_(cache),
        pool_(own_pool),
        authn_(authn),
        access_(access),
        wakeups_(wakeups),
        stats_(stats),
        options_(options),
        routes_(routes) {
    if (options_.list_pool != nullptr) list_builds_.emplace(*options_.list_pool);
    wakeups_.set_after_drain(&FlushWatchWriteTally);
  }

  asio::awaitable<bool> Serve(Exchange& x) override;

 private:
  struct Read;  // What Serve has learnt of one read (decision.h's facts, and their sources).

  // Learns the fact `step` names (decision.h), into `read`: LearnAtOnce the ones with no wait.
  asio::awaitable<void> Learn(Exchange& x, Step step, Read& read);
  void LearnAtOnce(const Exchange& x, Step step, Read& read);
  // The cache of the representation the apiserver would answer in (ChooseForm), and its state.
  void Bind(const Exchange& x, Read& read) const;
  // The resourceVersion a GET or LIST must reflect (a LIST's from its plan), waited for.
  asio::awaitable<Freshness> RequireVersion(const RequestInfo& info, Read& read);
  // Answers from the chosen cache; false: declined as it looked (nothing written).
  asio::awaitable<bool> ServeFromCache(Exchange& x, Read& read);
  // Counts a declined read; a watch that may be the cache's later is sent upstream to end by
  // then (watch_return.h).
  void Decline(Exchange& x, const Decision& decision);
  // Answers a refused read with its Status, and counts it.
  asio::awaitable<void> Refuse(Exchange& x, RefuseReason why, const Read& read);
  // Answers 429 for a read whose review got no answer in time, and counts it.
  asio::awaitable<void> RefuseUnreviewed(Exchange& x, Refusal why);

  const CachedResources& cache_;
  UpstreamPool& pool_;
  Authenticator& authn_;
  AccessReview& access_;
  Wakeups& wakeups_;
  CacheServeStats& stats_;
  WatchOptions options_;
  RouteStats* routes_;
  std::optional<ListBuilds> list_builds_;  // This thread's place in the list pool.
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CACHE_HANDLER_H_
