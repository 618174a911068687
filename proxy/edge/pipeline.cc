#include "proxy/edge/pipeline.h"

#include <cstring>

#include "absl/time/clock.h"
#include "common/strings.h"

namespace kf {

asio::awaitable<void> Pipeline::Serve(Exchange& x) {
  co_await Handle(x);
  // The chain's frames have ended; what a handler left running (a watch) runs from here.
  if (x.detached) {
    const std::unique_ptr<Detached> rest = std::move(x.detached);
    co_await rest->Run();
    if (!rest->error().empty()) x.error = rest->error();
  }
}

asio::awaitable<void> Pipeline::Handle(Exchange& x) {
  x.route = RouteOf(x.request, stages_.routes);
  switch (x.route) {
    case Route::kLocal: {
      x.answer = Answer::kLocal;
      const bool served = co_await stages_.local->Serve(x);
      if (served) co_return;
      // Declined (a /metrics its caller may not read): the apiserver answers it exactly.
      x.route = Route::kPassthrough;
      x.answer = Answer::kPassthrough;
      break;
    }
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

namespace {

// Views of the request's fields (`resource` holds its group/resource, which the request does
// not keep as one string).
RequestLogFields FieldsOf(const Exchange& x, const std::string& resource) {
  const Request& r = x.request;
  return RequestLogFields{
      .method = r.method_string,
      .uri = r.target,
      .verb = r.info.verb,
      .resource = resource,
      .user_agent = r.headers[beast::http::field::user_agent],
      .accept = r.headers[beast::http::field::accept],
      .upstream = x.upstream,
      .error = x.error,
      .answer = x.answer,
      .h2 = r.version == 20,
      .start = x.start,
  };
}

}  // namespace

RequestRecord::RequestRecord(const RequestLogFields& fields) : fields_(fields) {
  std::string_view* views[] = {&fields_.method,   &fields_.uri,    &fields_.verb,
                               &fields_.resource, &fields_.accept, &fields_.user_agent,
                               &fields_.upstream, &fields_.error};
  size_t total = 0;
  for (const std::string_view* v : views) total += v->size();
  bytes_ = std::make_unique<char[]>(total);
  char* at = bytes_.get();
  for (std::string_view* v : views) {
    if (!v->empty()) std::memcpy(at, v->data(), v->size());
    *v = std::string_view(at, v->size());
    at += v->size();
  }
}

RequestRecord Pipeline::Record(const Exchange& x) {
  const std::string resource = x.request.info.GroupResource();
  return RequestRecord(FieldsOf(x, resource));
}

void Pipeline::Log(const Exchange& x, std::string_view remote) const {
  // Views of the request: nothing is copied for the line (Record is for a detached watch).
  const std::string resource = x.request.info.GroupResource();
  Log(FieldsOf(x, resource), x.response->status(), x.response->body_bytes(), remote);
}

void Pipeline::LogDetached(std::unique_ptr<Detached> watch, const RequestRecord& record,
                           const Response& response, std::string_view remote) const {
  const std::string watch_error = watch->error();  // Outlives the watch, for the line.
  watch.reset();                                   // Before the log line, as Serve has it.
  RequestLogFields fields = record.fields();
  if (!watch_error.empty()) fields.error = watch_error;
  Log(fields, response.status(), response.body_bytes(), remote);
}

void Pipeline::Log(const RequestLogFields& r, int status, uint64_t body_bytes,
                   std::string_view remote) const {
  stats_.answered[static_cast<size_t>(r.answer)].fetch_add(1, std::memory_order_relaxed);
  if (status == 503 && r.upstream.empty()) {
    stats_.upstream_unavailable.fetch_add(1, std::memory_order_relaxed);
  }
  log_.Info("request", {{"remote", remote},
                        {"method", r.method},
                        {"uri", r.uri},
                        {"verb", r.verb},
                        {"resource", r.resource},
                        {"status", status},
                        {"bytes", static_cast<int64_t>(body_bytes)},
                        {"route", AnswerName(r.answer)},
                        {"upstream", r.upstream},
                        {"error", r.error},
                        {"user_agent", r.user_agent},
                        {"protocol", r.h2 ? "h2" : "http/1.1"},
                        {"accept", r.accept},
                        {"latency_ms", absl::ToDoubleMilliseconds(absl::Now() - r.start)}});
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
