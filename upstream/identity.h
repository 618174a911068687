// Authenticator: who is behind a request, as the apiserver would say. A verified client
// certificate names its user itself (edge/client_cert.h); a bearer token is asked about once
// with a TokenReview (authentication.k8s.io/v1), made with kube-fanout's own credentials (its
// identity needs system:auth-delegator), and the answer is cached per token (keyed by its
// SHA-256, never the token itself) for --authentication-token-webhook-cache-ttl, as the
// apiserver's delegated authentication caches. No credentials, or ones the apiserver rejects:
// unknown (nullopt): the request then goes through to the apiserver, which answers it.
//
// Used for admission's flows and rules, the Event spam filter's keys, and the authorization of
// cached reads (access_review.h). One per worker thread; not thread-safe. Bounded.
#ifndef KUBE_FANOUT_UPSTREAM_IDENTITY_H_
#define KUBE_FANOUT_UPSTREAM_IDENTITY_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/async_semaphore.h"
#include "common/expiring_cache.h"
#include "common/single_flight.h"
#include "edge/request.h"
#include "upstream/request_header.h"
#include "upstream/review_stats.h"
#include "upstream/upstream_pool.h"

namespace kf {

using UserInfo = Identity;  // edge/request.h: who is asking, as the apiserver knows them.

struct CacheSettings {
  std::chrono::seconds ttl{10};           // Positive answers.
  std::chrono::seconds negative_ttl{10};  // Negative answers.
  size_t max_entries = 10000;             // Per worker thread.
  // New reviews (answers not in the cache) per second and burst, per worker thread; 0: no
  // limit. Past it a credential goes unreviewed (unknown: passthrough, and admission by user
  // agent and address) instead of costing the apiserver a review: a flood of made-up tokens
  // cannot turn into a flood of TokenReviews.
  double reviews_per_second = 0;
  double review_burst = 0;
};

class Authenticator {
 public:
  // `own_authorization`: kube-fanout's own Authorization header, for the TokenReviews.
  // `in_flight`: bounds the reviews this thread has on their way to the apiserver.
  // `names`: the request-header fields front proxies name users in.
  Authenticator(CacheSettings settings, ReviewStats& stats, AsyncSemaphore& in_flight,
                std::function<std::string()> own_authorization,
                const RequestHeaderNames& names = DefaultRequestHeaderNames())
      : names_(names),
        settings_(settings),
        stats_(stats),
        in_flight_(in_flight),
        review_tokens_(settings.review_burst),
        review_tokens_at_(std::chrono::steady_clock::now()),
        own_authorization_(std::move(own_authorization)),
        entries_(settings.max_entries) {}

  // The request's user: its client certificate's when that authenticates (the apiserver's
  // x509 authenticator runs before its token authenticators), else its bearer token's. nullopt:
  // unknown. `own_pool` is a pool of kube-fanout's own connections. `allow_stale`: when the
  // apiserver cannot be asked, the last answer for the token, however old (for classifying a
  // request, never for serving data).
  // `unauthenticated` (optional): set when the answer is that the request has no credentials
  // or ones the apiserver does not accept, rather than that it could not be asked.
  asio::awaitable<std::optional<UserInfo>> Authenticate(UpstreamPool& own_pool,
                                                        const Request& request, bool allow_stale,
                                                        bool* unauthenticated = nullptr);

  // The TokenReview body for `token`, and its answer's user (nullopt: not authenticated).
  static std::string ReviewBody(std::string_view token);
  static std::optional<UserInfo> ParseReview(std::string_view body);

 private:
  // nullopt: no answer (the review failed).
  asio::awaitable<std::optional<std::optional<UserInfo>>> Review(UpstreamPool& pool,
                                                                 const std::string& token,
                                                                 const std::string& key);

  // Takes one new-review token; false when the budget is spent.
  bool TakeReviewToken();

  const RequestHeaderNames& names_;
  CacheSettings settings_;
  ReviewStats& stats_;
  AsyncSemaphore& in_flight_;
  double review_tokens_ = 0;
  std::chrono::steady_clock::time_point review_tokens_at_{};
  std::function<std::string()> own_authorization_;
  ExpiringCache<std::optional<UserInfo>> entries_;
  SingleFlight<std::optional<std::optional<UserInfo>>> flights_;  // Reviews on their way.
};

// A user a connection vouched for (a client certificate's, a front proxy's) as the apiserver's
// authenticator chain hands it on: plus system:authenticated.
UserInfo AuthenticatedUser(UserInfo user);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_IDENTITY_H_
