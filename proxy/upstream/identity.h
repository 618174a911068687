// Authenticator: who is behind a request, as the apiserver would say. A verified client
// certificate names its user itself (proxy/edge/client_cert.h); a bearer token is asked about once
// with a TokenReview (authentication.k8s.io/v1), made with kube-fanout's own credentials (its
// identity needs system:auth-delegator), and the answer is cached per token (keyed by its
// SHA-256, never the token itself) for --authentication-token-webhook-cache-ttl, as the
// apiserver's delegated authentication caches. No credentials, or ones the apiserver rejects:
// unauthenticated. A review the apiserver refused kube-fanout (401, 403), or one not asked
// because the budget for new reviews was spent: unknown, and the request goes through to the
// apiserver, which answers it, unless it is a cached read of a token not asked (throttled). A
// review that got no answer in time (review_call.h: the upstream unreachable or overloaded, the
// review past its 10 s, too many waiting): unavailable. A cached read whose token is throttled
// or unavailable is answered 429 rather than passed through (proxy/serve/cache_handler.h).
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

#include "common/expiring_cache.h"
#include "common/single_flight.h"
#include "proxy/edge/request.h"
#include "proxy/upstream/request_header.h"
#include "proxy/upstream/review_call.h"
#include "proxy/upstream/review_stats.h"
#include "proxy/upstream/upstream_pool.h"
#include "proxy/upstream/vouched.h"

namespace kf {

using UserInfo = Identity;  // proxy/edge/request.h: who is asking, as the apiserver knows them.

struct CacheSettings {
  std::chrono::seconds ttl{10};           // Positive answers.
  std::chrono::seconds negative_ttl{10};  // Negative answers.
  size_t max_entries = 10000;             // Per worker thread.
  // New reviews (answers not in the cache) per second and burst, per worker thread; 0: no
  // limit. Past it a credential goes unreviewed (unknown: admission by user agent and address,
  // a cached read answered 429, anything else passed through) instead of costing the apiserver
  // a review: a flood of made-up tokens cannot turn into a flood of TokenReviews, nor of reads.
  double reviews_per_second = 0;
  double review_burst = 0;
};

// Who a request is, as far as the Authenticator learnt.
struct Authentication {
  std::optional<UserInfo> user;  // nullopt: not known.
  // How the request's identity was vouched for (vouched.h): part of every key an answer is
  // shared under (the access-review cache).
  Vouched::By by = Vouched::By::kNone;
  // Without a user: the answer is that the request has no credentials or ones the apiserver
  // does not accept, rather than that it could not be asked.
  bool unauthenticated = false;
  // The TokenReview got no answer (ReviewFailure::kUnavailable); `user` may then be a stale
  // answer, when allowed.
  bool unavailable = false;
  // The token was not reviewed: it is new and the budget for new reviews was spent. Unknown,
  // as when refused (`user` a stale answer at most, when allowed), but a cached read is
  // answered 429 rather than passed through.
  bool throttled = false;
};

class Authenticator {
 public:
  // `own_authorization`: kube-fanout's own Authorization header, for the TokenReviews.
  // `slots`: bounds the reviews this thread has on their way to the apiserver.
  // `names`: the request-header fields front proxies name users in.
  Authenticator(CacheSettings settings, ReviewStats& stats, ReviewSlots& slots,
                std::function<std::string()> own_authorization,
                const RequestHeaderNames& names = DefaultRequestHeaderNames())
      : names_(names),
        settings_(settings),
        stats_(stats),
        slots_(slots),
        review_tokens_(settings.review_burst),
        review_tokens_at_(std::chrono::steady_clock::now()),
        own_authorization_(std::move(own_authorization)),
        entries_(settings.max_entries) {}

  // The request's user (vouched.h: a front proxy's fields, a client certificate's user, else
  // its bearer token's); a refused certificate, or no credentials: unauthenticated.
  // `own_pool` is a pool of kube-fanout's own connections. `allow_stale`: when the apiserver
  // cannot be asked, the last answer for the token, however old (for classifying a request,
  // never for serving data).
  asio::awaitable<Authentication> Authenticate(UpstreamPool& own_pool, const Request& request,
                                               bool allow_stale);

  // The TokenReview body for `token`, and its answer's user (nullopt: not authenticated, or
  // a user that could not be carried in a header field: proxy/edge/field_syntax.h).
  static std::string ReviewBody(std::string_view token);
  static std::optional<UserInfo> ParseReview(std::string_view body);

 private:
  // A TokenReview's outcome: the apiserver's answer (cached), or why there is none.
  struct Reviewed {
    ReviewFailure failure = ReviewFailure::kNone;  // kRefused also when not asked (budget).
    std::optional<UserInfo> user;                  // The answer, when failure is kNone.
    bool throttled = false;                        // Not asked: the budget was spent.
  };
  asio::awaitable<Reviewed> Review(UpstreamPool& pool, const std::string& token,
                                   const std::string& key);

  // Takes one new-review token; false when the budget is spent.
  bool TakeReviewToken();

  const RequestHeaderNames& names_;
  CacheSettings settings_;
  ReviewStats& stats_;
  ReviewSlots& slots_;
  double review_tokens_ = 0;
  std::chrono::steady_clock::time_point review_tokens_at_{};
  std::function<std::string()> own_authorization_;
  ExpiringCache<std::optional<UserInfo>> entries_;
  SingleFlight<Reviewed> flights_;  // Reviews on their way.
};

// A user a connection vouched for (a client certificate's, a front proxy's) as the apiserver's
// authenticator chain hands it on: plus system:authenticated.
UserInfo AuthenticatedUser(UserInfo user);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_IDENTITY_H_
