#include "filters/identity_filter.h"

namespace kf {

asio::awaitable<void> IdentityFilter::Serve(Exchange& x, const Next& next) {
  const RequestInfo& info = x.request.info;
  if (always_ || (event_creations_ && info.IsEventCreation())) {
    const std::string authorization(x.request.headers[beast::http::field::authorization]);
    x.user = co_await who_.Lookup(pool_, authorization);
  }
  co_await next(x);
}

}  // namespace kf
