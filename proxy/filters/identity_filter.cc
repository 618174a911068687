#include "proxy/filters/identity_filter.h"

namespace kf {

asio::awaitable<void> IdentityFilter::Serve(Exchange& x, const Next& next) {
  const RequestInfo& info = x.request.info;
  if (always_ || (event_creations_ && info.IsEventCreation())) {
    Authentication who = co_await authn_.Authenticate(pool_, x.request, /*allow_stale=*/true);
    x.user = std::move(who.user);
    x.unauthenticated = who.unauthenticated;
    x.identity_unavailable = who.unavailable;
    x.identity_throttled = who.throttled;
  }
  co_await next(x);
}

}  // namespace kf
