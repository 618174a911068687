#include "filters/identity_filter.h"

namespace kf {

asio::awaitable<void> IdentityFilter::Serve(Exchange& x, const Next& next) {
  const RequestInfo& info = x.request.info;
  if (always_ || (event_creations_ && info.IsEventCreation())) {
    bool unauthenticated = false;
    x.user = co_await authn_.Authenticate(pool_, x.request, /*allow_stale=*/true, &unauthenticated);
    x.unauthenticated = unauthenticated;
  }
  co_await next(x);
}

}  // namespace kf
