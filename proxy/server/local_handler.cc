#include "proxy/server/local_handler.h"

namespace kf {

asio::awaitable<bool> LocalHandler::Serve(Exchange& x) {
  const RequestInfo& info = x.request.info;
  beast::error_code ec;
  if (info.path == "/metrics") {
    const std::string body = metrics_();
    ec = co_await WriteWhole(*x.response, 200, "text/plain; version=0.0.4; charset=utf-8", body);
  } else if (auto health = health_.Handle(info.path, info.query)) {
    ec = co_await WriteWhole(*x.response, health->code, "text/plain; charset=utf-8", health->body);
  } else {
    co_return false;
  }
  if (ec) x.error = ec.message();
  co_return true;
}

asio::awaitable<bool> ApiMetricsHandler::Serve(Exchange& x) {
  if (x.request.info.path != "/metrics") {
    const bool served = co_await local_.Serve(x);
    co_return served;
  }
  // The apiserver's filters: authentication, then authorization of GET /metrics as a
  // non-resource URL (RBAC's nonResourceURLs). Only what it would allow is served here.
  const Authentication who =
      co_await authn_.Authenticate(own_pool_, x.request, /*allow_stale=*/false);
  if (!who.user) co_return false;
  const Access access =
      co_await access_.AllowedPath(own_pool_, who.by, *who.user, x.request.info.verb, "/metrics");
  if (access != Access::kAllowed) co_return false;
  const bool served = co_await local_.Serve(x);
  co_return served;
}

asio::awaitable<bool> NotFoundHandler::Serve(Exchange& x) {
  const beast::error_code ec =
      co_await WriteWhole(*x.response, 404, "text/plain; charset=utf-8", "404 page not found\n");
  if (ec) x.error = ec.message();
  co_return true;
}

}  // namespace kf
