#include "edge/pipeline.h"

#include "absl/time/clock.h"
#include "common/strings.h"

namespace kf {

asio::awaitable<void> Pipeline::Serve(Exchange& x) {
  x.route = RouteOf(x.request, stages_.routes);
  switch (x.route) {
    case Route::kLocal:
      x.answer = Answer::kLocal;
      co_await stages_.local->Serve(x);
      co_return;
    case Route::kCache:
      x.answer = Answer::kCache;
      break;
    case Route::kTunnel:
      x.answer = Answer::kTunnel;
      break;
    case Route::kPassthrough:
      x.answer = Answer::kPassthrough;
      break;
  }
  const Next serve_route = [this](Exchange& e) { return ServeRoute(e); };
  co_await RunChain(stages_.front, x, serve_route);
  // The chain's frames have ended; what a handler left running (a watch) runs from here.
  if (x.detached) {
    const std::unique_ptr<Detached> rest = std::move(x.detached);
    co_await rest->Run();
  }
}

asio::awaitable<void> Pipeline::ServeRoute(Exchange& x) {
  if (x.route == Route::kCache && stages_.cache != nullptr) {
    const bool served = co_await stages_.cache->Serve(x);
    if (served) co_return;
  }
  if (x.route == Route::kCache) {
    // Declined: the apiserver answers it exactly.
    x.route = Route::kPassthrough;
    x.answer = Answer::kPassthrough;
  }
  const Next relay = [this](Exchange& e) { return Relay(e); };
  co_await RunChain(stages_.passthrough, x, relay);
}

asio::awaitable<void> Pipeline::Relay(Exchange& x) { co_await stages_.relay->Serve(x); }

void Pipeline::Log(const Exchange& x, std::string_view remote) const {
  stats_.answered[static_cast<size_t>(x.answer)].fetch_add(1, std::memory_order_relaxed);
  const int status = x.response->status();
  if (status == 503 && x.upstream.empty()) {
    stats_.upstream_unavailable.fetch_add(1, std::memory_order_relaxed);
  }
  const Request& r = x.request;
  log_.Info("request", {{"remote", remote},
                        {"method", r.method_string},
                        {"uri", r.target},
                        {"verb", r.info.verb},
                        {"resource", r.info.GroupResource()},
                        {"status", status},
                        {"bytes", static_cast<int64_t>(x.response->body_bytes())},
                        {"route", AnswerName(x.answer)},
                        {"upstream", x.upstream},
                        {"error", x.error},
                        {"user_agent", std::string_view(r.headers[beast::http::field::user_agent])},
                        {"protocol", r.version == 20 ? "h2" : "http/1.1"},
                        {"accept", std::string_view(r.headers[beast::http::field::accept])},
                        {"latency_ms", absl::ToDoubleMilliseconds(absl::Now() - x.start)}});
}

void Pipeline::LogUnparsed(std::string_view remote, int status, std::string_view error) const {
  stats_.answered[static_cast<size_t>(Answer::kRejected)].fetch_add(1, std::memory_order_relaxed);
  stats_.Refused(status == 431 ? Refusal::kHeaderTooLarge : Refusal::kBadRequest);
  log_.Info("request", {{"remote", remote},
                        {"status", status},
                        {"route", AnswerName(Answer::kRejected)},
                        {"error", error}});
}

}  // namespace kf
