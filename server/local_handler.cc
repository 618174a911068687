#include "server/local_handler.h"

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

asio::awaitable<bool> NotFoundHandler::Serve(Exchange& x) {
  const beast::error_code ec =
      co_await WriteWhole(*x.response, 404, "text/plain; charset=utf-8", "404 page not found\n");
  if (ec) x.error = ec.message();
  co_return true;
}

}  // namespace kf
