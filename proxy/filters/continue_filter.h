// ContinueFilter: answers "Expect: 100-continue" once the request is admitted, so the client
// sends its body (the upstream request carries no Expect: the body is streamed anyway).
// Stateless.
#ifndef KUBE_FANOUT_FILTERS_CONTINUE_FILTER_H_
#define KUBE_FANOUT_FILTERS_CONTINUE_FILTER_H_

#include "proxy/edge/filter.h"

namespace kf {

class ContinueFilter : public Filter {
 public:
  asio::awaitable<void> Serve(Exchange& x, const Next& next) override {
    const beast::error_code ec = co_await x.response->Continue();
    if (ec) co_return;  // The client left.
    co_await next(x);
  }
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_CONTINUE_FILTER_H_
