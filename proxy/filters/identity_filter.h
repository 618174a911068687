// IdentityFilter: learns who is asking (Authenticator: a verified client certificate, or a
// TokenReview cached per token) when a later step needs it: admission's flows, and the Event
// spam filter's keys. Unknown callers go on without an identity.
//
// One per worker thread (the Authenticator and the pool are that thread's).
#ifndef KUBE_FANOUT_FILTERS_IDENTITY_FILTER_H_
#define KUBE_FANOUT_FILTERS_IDENTITY_FILTER_H_

#include "proxy/edge/filter.h"
#include "proxy/upstream/identity.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

class IdentityFilter : public Filter {
 public:
  // `always`: look every request up (admission is on); else only Event creations, when
  // `event_creations` (the spam filter is on).
  // `own_pool`: kube-fanout's own connections, for the TokenReviews.
  IdentityFilter(Authenticator& authn, UpstreamPool& own_pool, bool always, bool event_creations)
      : authn_(authn), pool_(own_pool), always_(always), event_creations_(event_creations) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

 private:
  Authenticator& authn_;
  UpstreamPool& pool_;
  bool always_;
  bool event_creations_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_IDENTITY_FILTER_H_
