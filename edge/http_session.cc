#include "edge/http_session.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/strings.h"
#include "common/await_callback.h"
#include "passthrough/hop_by_hop.h"
#include "passthrough/passthrough.h"
#include "edge/request_parser.h"
#include "edge/request_info.h"
#include "server/worker.h"

namespace kf {
namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// Go's http.Server in the apiserver keeps idle keep-alive connections for 90 s (IdleTimeout).
constexpr auto kIdleTimeout = std::chrono::seconds(90);
constexpr auto kHeaderTimeout = std::chrono::seconds(30);
constexpr auto kWriteTimeout = std::chrono::seconds(30);
constexpr auto kTlsCloseBudget = std::chrono::milliseconds(500);
// The apiserver refuses request bodies over 3 MiB (MaxRequestBodyBytes); an Event body read
// whole for the spam filter is bounded the same.
constexpr size_t kMaxEventBody = 3u << 20;

std::string_view IpOf(std::string_view remote) {
  // "1.2.3.4:5" or "[::1]:5" → address only.
  const size_t colon = remote.rfind(':');
  std::string_view ip = colon == std::string_view::npos ? remote : remote.substr(0, colon);
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  return ip;
}

}  // namespace

struct HttpSession::RequestLog {
  absl::Time start = absl::Now();
  std::string method;
  std::string uri;
  std::string verb;
  std::string resource;
  std::string user_agent;
  std::string route;
  std::string upstream;
  std::string error;
  int status = 0;
  uint64_t bytes = 0;
};

HttpSession::HttpSession(std::unique_ptr<AnyStream> client, std::string remote, Worker& worker,
                         const SessionEnv& env)
    : client_(std::move(client)), remote_(std::move(remote)), worker_(worker), env_(env) {
  worker_.Register(this);
  env_.active_sessions.fetch_add(1, std::memory_order_relaxed);
}

HttpSession::~HttpSession() {
  worker_.Unregister(this);
  env_.active_sessions.fetch_sub(1, std::memory_order_relaxed);
}

void HttpSession::Start() {
  asio::co_spawn(
      worker_.ioc(), [self = shared_from_this()] { return self->Run(); }, asio::detached);
}

void HttpSession::Stop() {
  stopping_ = true;
  if (state_ == State::kIdle || state_ == State::kStarting) client_->Cancel();
  if (state_ == State::kWatching && stop_hook_) stop_hook_();
}

asio::awaitable<void> HttpSession::Run() {
  if (AnyStream::TlsStream* tls = client_->tls()) {
    client_->tcp().expires_after(kHandshakeTimeout);
    auto [ec] = co_await tls->async_handshake(asio::ssl::stream_base::server, use_nothrow);
    if (ec) {
      env_.log.Log(Logger::Level::kDebug, "TLS handshake failed",
                   {{"remote", remote_}, {"error", ec.message()}});
      co_return;
    }
  }
  while (!stopping_ && co_await ServeOne()) {
  }
  co_await client_->Close(kTlsCloseBudget);
}

asio::awaitable<bool> HttpSession::ServeOne() {
  RequestParser parser;
  state_ = State::kIdle;
  // The first byte may be a long time coming on a kept-alive connection; the rest of the header
  // must follow promptly.
  client_->tcp().expires_after(buffer_.size() > 0 ? kHeaderTimeout : kIdleTimeout);
  auto [ec, n] = co_await http::async_read_header(*client_, buffer_, parser, use_nothrow);
  if (ec) {
    // Only a malformed request is answered, with the bytes Go's server writes before it closes
    // the connection (431 for a header past the limits, else 400); a peer that went away, a
    // timeout or a stop just ends the connection.
    const bool malformed =
        ec != http::error::end_of_stream && ec != http::error::partial_message &&
        &ec.category() == &http::make_error_code(http::error::bad_target).category();
    if (malformed) {
      RequestLog log;
      log.route = "reject";
      log.error = ec.message();
      co_await WriteGoServerError(ec == http::error::header_limit ? 431 : 400, log);
    }
    co_return false;
  }
  state_ = State::kBusy;
  const auto& req = parser.get();
  RequestLog log;
  log.method = std::string(req.method_string());
  log.uri = std::string(req.target());
  log.user_agent = std::string(req[http::field::user_agent]);
  const bool keep_alive = req.keep_alive() && !stopping_;

  auto info = RequestInfo::Parse(req.method_string(), req.target());
  if (!info.ok()) {
    log.route = "reject";
    co_return co_await WriteKubeStatus(ToKubeStatus(info.status()), false, log);
  }
  log.verb = info->verb;
  log.resource = info->GroupResource();

  if (!info->is_resource_request &&
      (req.method() == http::verb::get || req.method() == http::verb::head)) {
    if (info->path == "/metrics") {
      log.route = "local";
      co_return co_await WriteSimple(200, "text/plain; version=0.0.4; charset=utf-8",
                                     env_.metrics(), keep_alive && parser.is_done(), log);
    }
    if (auto health = env_.health.Handle(info->path, info->query)) {
      log.route = "local";
      // Nothing is expected after a GET header; anything that is there closes the connection.
      co_return co_await WriteSimple(health->code, "text/plain; charset=utf-8",
                                     std::move(health->body), keep_alive && parser.is_done(), log);
    }
  }

  const bool events = info->resource == "events" &&
                    (info->api_group.empty() || info->api_group == "events.k8s.io");
  const bool judge_event = events && info->verb == "create" && env_.event_spam_filter_enabled();
  // Who is asking (cached per credential): admission's flows and the Event spam filter's keys.
  std::optional<UserInfo> user;
  if (env_.admission != nullptr || judge_event) {
    const std::string authorization(req[http::field::authorization]);
    user = co_await worker_.who_am_i().Lookup(worker_.upstream_pool(), authorization);
  }

  // Admission (ratelimit/): fair queues per priority level, token buckets for polling flows,
  // and a cap on passthrough requests in flight upstream. Over a limit: 429 with Retry-After.
  ratelimit::Decision admitted = co_await Admit(req.base(), *info, req.method_string(), user);
  if (!admitted.admitted) {
    log.route = "reject";
    log.error = absl::StrCat("admission: ", admitted.reject_reason, " (", admitted.flow.schema,
                             "/", admitted.flow.level, ")");
    KubeStatus status{429, "TooManyRequests", "Too many requests, please try again later.",
                      admitted.retry_after_seconds};
    co_return co_await WriteKubeStatus(status, keep_alive && parser.is_done(), log);
  }
  // A watch holds its seat only while it starts (as the apiserver's APF counts watches).
  if (info->verb == "watch") admitted.seat.Release();

  if (req[http::field::expect] == "100-continue" && !parser.is_done()) {
    // The upstream request carries no Expect (we stream the body anyway), so answer it here.
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    client_->tcp().expires_after(kWriteTimeout);
    auto [cec, cn] = co_await asio::async_write(*client_, asio::buffer(kContinue), use_nothrow);
    if (cec) co_return false;
  }

  if (const CachedResources::Entry* cached = env_.cache ? env_.cache->Find(*info) : nullptr;
      cached != nullptr && req.method() == http::verb::get && parser.is_done()) {
    if (info->verb == "watch") state_ = State::kWatching;
    CacheRequest creq{*client_,
                      buffer_,
                      req.base(),
                      *info,
                      *cached->cacher,
                      *cached->reflector,
                      worker_.own_pool(),
                      worker_.upstream_pool(),
                      worker_.access_review(),
                      worker_.wakeups(),
                      env_.cache_stats,
                      stopping_,
                      env_.own_credentials,
                      env_.watcher_max_queue_bytes,
                      env_.bookmark_interval_ms};
    std::optional<CacheOutcome> served = co_await ServeFromCache(creq, stop_hook_);
    state_ = State::kBusy;
    if (served) {
      log.route = "cache";
      log.status = served->status;
      log.bytes = served->bytes;
      log.error = served->error;
      LogRequest(log);
      co_return served->keep_alive&& keep_alive && !stopping_;
    }
  }

  log.route = IsUpgradeRequest(req.base()) ? "tunnel" : "passthrough";
  // Identical concurrent reads share one upstream call (coalescer.h): a follower waits for the
  // next call and gets its answer; a leader relays as usual and keeps a copy for them.
  std::string coalesce_key;
  std::shared_ptr<CapturedResponse> capture;
  Coalescer::Ticket ticket;
  if (env_.coalescer != nullptr && log.route == "passthrough" &&
      req.method() == http::verb::get && (info->verb == "get" || info->verb == "list") &&
      parser.is_done()) {
    coalesce_key = CoalesceKey(req.method_string(), req.target(), req.base());
    ticket = env_.coalescer->Join(coalesce_key);
    if (!ticket.leader) {
      CapturedPtr shared = co_await WaitFlight(ticket.flight);
      if (shared && shared->complete) {
        env_.coalescer->CountCoalesced();
        log.route = "coalesced";
        co_return co_await WriteCaptured(*shared, keep_alive, log);
      }
      ticket = Coalescer::Ticket{};  // The leader's call failed: go upstream alone.
    } else {
      if (ticket.wait_for) {
        co_await WaitFlight(ticket.wait_for);
        env_.coalescer->Start(coalesce_key, ticket.flight);
      }
      capture = std::make_shared<CapturedResponse>();
    }
  }
  struct CompleteFlight {
    Coalescer* coalescer;
    const std::string& key;
    Coalescer::Ticket& ticket;
    std::shared_ptr<CapturedResponse>& capture;
    ~CompleteFlight() {
      if (ticket.leader) {
        coalescer->Complete(key, ticket.flight,
                            capture && capture->complete ? CapturedPtr(capture) : nullptr);
      }
    }
  } complete_flight{env_.coalescer, coalesce_key, ticket, capture};
  // The upstream's shield: requests in flight to it, beyond long-running ones and exempt flows.
  struct InFlight {
    std::atomic<int64_t>* n = nullptr;
    ~InFlight() {
      if (n != nullptr) n->fetch_sub(1, std::memory_order_relaxed);
    }
  } in_flight;
  if (info->verb != "watch" && log.route == "passthrough" &&
      env_.max_passthrough_in_flight > 0 && admitted.flow.level != "exempt") {
    if (env_.passthrough_in_flight.fetch_add(1, std::memory_order_relaxed) >=
        env_.max_passthrough_in_flight) {
      env_.passthrough_in_flight.fetch_sub(1, std::memory_order_relaxed);
      env_.passthrough_rejected.fetch_add(1, std::memory_order_relaxed);
      log.route = "reject";
      log.error = "admission: upstream-busy";
      KubeStatus status{429, "TooManyRequests", "Too many requests, please try again later.", 1};
      co_return co_await WriteKubeStatus(status, keep_alive && parser.is_done(), log);
    }
    in_flight.n = &env_.passthrough_in_flight;
  }
  std::optional<std::string> body;
  if (judge_event && user) {
    // Event creations of an authenticated user pass the spam filter first: the body is read
    // whole (bounded as the apiserver bounds request bodies), judged against that user's
    // buckets, then relayed as read. Unauthenticated ones go straight to the apiserver, which
    // refuses them; their bodies are never looked at.
    auto read = co_await ReadWholeBody(parser, kMaxEventBody);
    if (!read) {
      log.route = "reject";
      co_return co_await WriteKubeStatus(
          KubeStatus{413, "RequestEntityTooLarge", "Request entity too large", std::nullopt},
          false, log);
    }
    if (!env_.event_filter->Allow(user->username, *read, std::chrono::steady_clock::now())) {
      log.route = "reject";
      log.error = "event spam filter";
      KubeStatus status{429, "TooManyRequests",
                        "Too many events from this source about this object, please try again "
                        "later.",
                        300};
      co_return co_await WriteKubeStatus(status, keep_alive, log);
    }
    body = std::move(read);
  }
  if (info->verb == "watch") state_ = State::kWatching;
  RelayRequest relay{*client_,
                     buffer_,
                     parser,
                     *info,
                     std::string(IpOf(remote_)),
                     events ? worker_.events_pool() : worker_.upstream_pool(),
                     stop_hook_,
                     stopping_,
                     body ? &*body : nullptr,
                     capture.get()};
  RelayOutcome outcome = co_await Relay(relay);
  state_ = State::kBusy;
  log.upstream = outcome.upstream;
  log.error = outcome.error;
  if (outcome.status == 0) {
    // Nothing reached the client yet: say why, as a Status.
    KubeStatus status{
        503, "ServiceUnavailable",
        absl::StrCat("kube-fanout could not reach the upstream apiserver: ", outcome.error), 1};
    co_return co_await WriteKubeStatus(status, false, log);
  }
  log.status = outcome.status;
  log.bytes = outcome.bytes_out;
  LogRequest(log);
  co_return outcome.client_reusable && !stopping_;
}

void HttpSession::LogRequest(const RequestLog& log) const {
  RouteStats& r = env_.routes;
  if (log.route == "cache") {
    ++r.cache;
  } else if (log.route == "passthrough") {
    ++r.passthrough;
  } else if (log.route == "tunnel") {
    ++r.tunnel;
  } else if (log.route == "local") {
    ++r.local;
  } else if (log.route == "coalesced") {
    ++r.coalesced;
  } else {
    ++r.rejected;
  }
  if (log.status == 503 && log.upstream.empty()) ++r.upstream_unavailable;
  env_.log.Info("request", {{"remote", remote_},
                            {"method", log.method},
                            {"uri", log.uri},
                            {"verb", log.verb},
                            {"resource", log.resource},
                            {"status", log.status},
                            {"bytes", log.bytes},
                            {"route", log.route},
                            {"upstream", log.upstream},
                            {"error", log.error},
                            {"user_agent", log.user_agent},
                            {"latency_ms", absl::ToDoubleMilliseconds(absl::Now() - log.start)}});
}

asio::awaitable<CapturedPtr> HttpSession::WaitFlight(std::shared_ptr<Coalescer::Flight> flight) {
  auto result = co_await AwaitCallback<CapturedPtr>(
      [&flight](std::function<void(CapturedPtr)> done) {
        Coalescer::OnDone(flight, std::move(done));
      },
      std::chrono::seconds(70));  // Past the upstream's own limits.
  co_return result ? *result : nullptr;
}

asio::awaitable<bool> HttpSession::WriteCaptured(const CapturedResponse& shared, bool keep_alive,
                                                 RequestLog& log) {
  http::response<http::string_body> res;
  res.result(shared.status);
  res.reason(shared.reason);
  res.version(11);
  for (const auto& f : shared.fields) res.insert(f.name_string(), f.value());
  res.body() = shared.body;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  log.status = static_cast<int>(shared.status);
  log.bytes = shared.body.size();
  client_->tcp().expires_after(kWriteTimeout);
  auto [ec, n] = co_await http::async_write(*client_, res, use_nothrow);
  if (ec) log.error = ec.message();
  LogRequest(log);
  co_return !ec && keep_alive;
}

asio::awaitable<std::optional<std::string>> HttpSession::ReadWholeBody(
    RequestParser& parser, size_t limit) {
  std::string body;
  std::array<char, 16384> buf;
  while (!parser.is_done()) {
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    client_->tcp().expires_after(kHeaderTimeout);
    auto [ec, n] = co_await http::async_read_some(*client_, buffer_, parser, use_nothrow);
    if (ec && ec != http::error::need_buffer) co_return std::nullopt;
    body.append(buf.data(), buf.size() - parser.get().body().size);
    if (body.size() > limit) co_return std::nullopt;
  }
  co_return body;
}

asio::awaitable<ratelimit::Decision> HttpSession::Admit(const http::fields& headers,
                                                        const RequestInfo& info,
                                                        std::string_view method,
                                                        const std::optional<UserInfo>& user) {
  if (env_.admission == nullptr) {
    ratelimit::Decision d;
    d.admitted = true;
    co_return d;
  }
  ratelimit::RequestAttributes a;
  if (user) {
    a.user = user->username;
    a.groups = user->groups;
  }
  a.user_agent = std::string(headers[http::field::user_agent]);
  a.source = std::string(IpOf(remote_));
  a.resource_request = info.is_resource_request;
  a.verb = info.is_resource_request ? info.verb : absl::AsciiStrToLower(ToAbsl(method));
  a.api_group = info.api_group;
  a.resource = info.resource;
  a.namespace_ = info.namespace_;
  a.path = info.path;
  a.long_running = info.verb == "watch";
  // The decision may come from another thread (a seat freed there). Queued requests are
  // decided by a freed seat or by ExpireQueued within their level's wait limit; the bound here
  // only guards against a decision that never comes.
  ratelimit::Admission& admission = *env_.admission;
  auto decision = co_await AwaitCallback<ratelimit::Decision>(
      [&admission, &a](std::function<void(ratelimit::Decision)> done) {
        admission.Admit(a, std::move(done));
      },
      std::chrono::minutes(5));
  if (!decision) {
    ratelimit::Decision d;
    d.reject_reason = "time-out";
    co_return d;
  }
  co_return std::move(*decision);
}

asio::awaitable<bool> HttpSession::WriteSimple(int code, std::string_view content_type,
                                               std::string body, bool keep_alive, RequestLog& log,
                                               std::optional<int> retry_after) {
  http::response<http::string_body> res;
  res.result(static_cast<unsigned>(code));
  res.version(11);
  res.set(http::field::cache_control, "no-cache, private");
  res.set(http::field::content_type, content_type);
  if (retry_after) res.set(http::field::retry_after, std::to_string(*retry_after));
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = std::move(body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  log.status = code;
  log.bytes = res.body().size();
  client_->tcp().expires_after(kWriteTimeout);
  auto [ec, n] = co_await http::async_write(*client_, res, use_nothrow);
  if (ec) log.error = ec.message();
  LogRequest(log);
  co_return !ec && keep_alive;
}

asio::awaitable<void> HttpSession::WriteGoServerError(int code, RequestLog& log) {
  // net/http's conn.serve for a request it cannot read: no Date, no length, then close.
  const std::string status =
      code == 431 ? "431 Request Header Fields Too Large" : "400 Bad Request";
  const std::string response = absl::StrCat(
      "HTTP/1.1 ", status,
      "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n", status);
  log.status = code;
  log.bytes = status.size();
  client_->tcp().expires_after(kWriteTimeout);
  auto [ec, n] = co_await asio::async_write(*client_, asio::buffer(response), use_nothrow);
  if (ec) log.error = ec.message();
  LogRequest(log);
}

asio::awaitable<bool> HttpSession::WriteKubeStatus(const KubeStatus& status, bool keep_alive,
                                                   RequestLog& log) {
  co_return co_await WriteSimple(status.code, "application/json", EncodeStatusBody(status),
                                 keep_alive, log, status.retry_after_seconds);
}

}  // namespace kf
