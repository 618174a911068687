#include "proxy/edge/http_session.h"

#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/use_nothrow.h"
#include "proxy/edge/client_cert.h"
#include "proxy/edge/http1_body.h"
#include "proxy/edge/http1_response.h"
#include "proxy/edge/peer_state.h"
#include "proxy/edge/request_parser.h"

namespace kf {
namespace {

namespace http = beast::http;
// What Go's server in the apiserver gives a TLS handshake from its connection's start: the
// smallest of its read, read-header and write timeouts, there ReadHeaderTimeout's 32 s. A
// shorter bound cut handshakes whose client was still there: a CPU-starved client-go process in
// a connect storm whose own 10 s had not yet run out (its timer starts after its TCP connect, and
// later still when its goroutine waits for a CPU) got an EOF or a broken pipe, and its request
// failed (docs/load.md, "A client-go fleet connecting at once").
constexpr auto kHandshakeTimeout = std::chrono::seconds(32);
// The 400 or 431 answer to a head that does not parse (WriteGoServerError): shorter than
// kWriteTimeout (deadlines.h), the connection closes after it.
constexpr auto kUnparsedAnswerWriteTimeout = std::chrono::seconds(30);
constexpr auto kTlsCloseBudget = std::chrono::milliseconds(500);

// A refused handshake; one that outlasted kHandshakeTimeout is an overload sign too (the log's
// overload episodes, proxy/server/storm_episode.h).
void CountHandshakeFailure(RouteStats& stats, const beast::error_code& ec) {
  stats.Refused(Refusal::kTlsHandshake);
  if (ec == beast::error::timeout) {
    stats.transport.tls_handshake_timeouts.fetch_add(1, std::memory_order_relaxed);
  }
}

// A handshake completed: full or resumed, and whether a TLS 1.3 ticket followed it.
void CountHandshake(TransportStats& t, SSL* ssl) {
  const size_t resumed = SSL_session_reused(ssl) == 1 ? 1 : 0;
  t.tls_handshakes[resumed].fetch_add(1, std::memory_order_relaxed);
  if (SSL_version(ssl) == TLS1_3_VERSION && SSL_get_num_tickets(ssl) > 0) {
    t.tls_tickets.fetch_add(1, std::memory_order_relaxed);
  }
}

std::string IpOf(std::string_view remote) {
  // "1.2.3.4:5" or "[::1]:5" → address only.
  const size_t colon = remote.rfind(':');
  std::string_view ip = colon == std::string_view::npos ? remote : remote.substr(0, colon);
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  return std::string(ip);
}

// Only a malformed head is answered; a peer that went away, a timeout or a stop just ends the
// connection.
bool Malformed(const beast::error_code& ec) {
  return ec != http::error::end_of_stream && ec != http::error::partial_message &&
         &ec.category() == &http::make_error_code(http::error::bad_target).category();
}

}  // namespace

struct HttpSession::Rest {
  std::unique_ptr<Http1Response> response;
  std::unique_ptr<Detached> watch;
  RequestRecord record;
  bool body_timed_out = false;
};

HttpSession::HttpSession(std::unique_ptr<AnyStream> client, std::string remote, Pipeline& pipeline,
                         SessionSet& sessions, std::atomic<int64_t>& active_sessions,
                         const Logger& log)
    : client_(std::move(client)),
      remote_(std::move(remote)),
      remote_ip_(IpOf(remote_)),
      pipeline_(pipeline),
      sessions_(sessions),
      active_sessions_(active_sessions),
      log_(log) {
  sessions_.Register(this);
  active_sessions_.fetch_add(1, std::memory_order_relaxed);
}

HttpSession::~HttpSession() {
  LeaveHandshakeQueue();  // A session that never ran (a stop before its start).
  sessions_.Unregister(this);
  active_sessions_.fetch_sub(1, std::memory_order_relaxed);
}

void HttpSession::Start(const asio::any_io_executor& executor) {
  asio::co_spawn(
      executor, [self = shared_from_this()] { return self->Run(); }, asio::detached);
}

void HttpSession::Stop() {
  if (h2_) {
    h2_->Stop();
    return;
  }
  if (state_ == State::kIdle || state_ == State::kStarting) client_->Cancel();
  stop_.Stop();
}

asio::awaitable<bool> HttpSession::Handshake() {
  LeaveHandshakeQueue();
  if (gated_ && std::chrono::steady_clock::now() - accepted_ > handshake_max_wait_ &&
      PeerClosed(client_->tcp().socket().native_handle())) {
    pipeline_.stats().Refused(Refusal::kHandshakeQueue);
    log_.Log(Logger::Level::kDebug, "TLS handshake not started: the client left while queued",
             {{"remote", remote_}});
    co_return false;
  }
  client_->tcp().expires_after(kHandshakeTimeout);
  const beast::error_code ec = co_await client_->ServerHandshake();
  if (ec) {
    if (client_->tls_server() != nullptr && client_->tls_server()->abandoned()) {
      pipeline_.stats().transport.tls_handshakes_abandoned.fetch_add(1, std::memory_order_relaxed);
      co_return false;
    }
    CountHandshakeFailure(pipeline_.stats(), ec);
    log_.Log(Logger::Level::kDebug, "TLS handshake failed",
             {{"remote", remote_}, {"error", ec.message()}});
    co_return false;
  }
  client_cert_ = PeerCertificate(client_->ssl());
  CountHandshake(pipeline_.stats().transport, client_->ssl());
  co_return true;
}

asio::awaitable<void> HttpSession::Run() {
  if (client_->is_tls()) {
    const bool handshaken = co_await Handshake();
    if (!handshaken) co_return;
  }
  // Go's server gives a connection's first request ReadHeaderTimeout from when it starts
  // reading it (after the handshake): no idle wait before it, and the h2c preface is part of
  // it.
  first_head_deadline_ = std::chrono::steady_clock::now() + head_timeouts_.header;
  // (GCC 12 miscompiles co_await inside conditions: results are named first throughout.)
  bool h2 = NegotiatedHttp2(*client_);
  if (!client_->is_tls()) {
    bool preface = false;
    const beast::error_code ec = co_await ReadHttp2Preface(&preface);
    if (ec) {
      // The peer closed (or went silent, or a stop came) before its first request: done. The
      // HTTP/1.x reader must not read again: on an edge-triggered reactor a read after the
      // one that saw the end of the stream waits for another readiness event that never
      // comes, and the socket stayed in CLOSE-WAIT until the 90 s idle timeout.
      if (ec == beast::error::timeout && buffer_.size() > 0) {
        pipeline_.stats().Refused(Refusal::kHeaderTimeout);
      }
      co_await client_->Close(kTlsCloseBudget);
      co_return;
    }
    h2 = preface;
  }
  if (h2 && !stop_.requested) {
    state_ = State::kBusy;
    h2_ = std::make_shared<Http2Session>(*client_, remote_, remote_ip_, pipeline_,
                                         pipeline_.stats().transport, std::move(client_cert_),
                                         h2_limits_);
    std::string received(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.consume(buffer_.size());
    buffer_.shrink_to_fit();  // HTTP/2 reads into its own buffers.
    co_await h2_->Run(std::move(received));
    co_await client_->Close(kTlsCloseBudget);
    co_return;
  }
  co_await ServeHttp1(true);
}

asio::awaitable<void> HttpSession::ServeHttp1(bool more) {
  while (more && !stop_.requested) {
    std::unique_ptr<Rest> rest;
    more = co_await ServeOne(&rest);
    if (rest) {
      // The watch goes on with no coroutine of this session's (an idle one keeps no frame):
      // its handlers keep the session, and when it is over the session goes on from
      // WatchEnded, in a coroutine of its own.
      rest_ = std::move(rest);
      rest_->watch->Start(shared_from_this(), [this] { WatchEnded(); });
      co_return;
    }
  }
  co_await client_->Close(kTlsCloseBudget);
}

void HttpSession::WatchEnded() {
  // Called from the watch's last handler, which must not outlive it: the rest runs later.
  asio::post(client_->get_executor(), [self = shared_from_this()] {
    const std::unique_ptr<Rest> rest = std::move(self->rest_);
    const bool more = self->EndRest(*rest);
    asio::co_spawn(
        self->client_->get_executor(), [self, more] { return self->ServeHttp1(more); },
        asio::detached);
  });
}

asio::awaitable<beast::error_code> HttpSession::ReadHttp2Preface(bool* preface) {
  for (;;) {
    const std::string_view seen(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    const size_t n = std::min(seen.size(), kHttp2Preface.size());
    if (seen.substr(0, n) != kHttp2Preface.substr(0, n)) co_return beast::error_code{};
    if (n == kHttp2Preface.size()) {
      *preface = true;
      co_return beast::error_code{};
    }
    client_->tcp().expires_at(first_head_deadline_);  // Not re-armed by the bytes that come.
    auto [ec, got] =
        co_await client_->async_read_some(buffer_.prepare(kHttp2Preface.size() - n), use_nothrow);
    if (ec) co_return ec;
    buffer_.commit(got);
  }
}

asio::awaitable<beast::error_code> HttpSession::AwaitHead() {
  if (first_head_) {
    first_head_ = false;
    client_->tcp().expires_at(first_head_deadline_);
    co_return beast::error_code{};
  }
  if (buffer_.size() == 0) {
    // A kept-alive connection: the first bytes may be a long time coming (Go's IdleTimeout);
    // the head's own deadline starts with them, as Go's starts once its Peek sees them. It
    // waits with a small room, not the last request's (the rest of a longer head is read with
    // the head): an idle connection holds 512 bytes here.
    constexpr size_t kFirstRead = 512;
    buffer_.shrink_to_fit();
    client_->tcp().expires_after(head_timeouts_.idle);
    auto [ec, n] = co_await client_->async_read_some(buffer_.prepare(kFirstRead), use_nothrow);
    if (ec) co_return ec;
    buffer_.commit(n);
  }
  // One deadline for the rest of the head, however its bytes are spread: a head trickled a byte
  // at a time gets no more time than one sent at once.
  client_->tcp().expires_after(head_timeouts_.header);
  co_return beast::error_code{};
}

asio::awaitable<bool> HttpSession::ServeOne(std::unique_ptr<Rest>* rest) {
  RequestParser parser;
  state_ = State::kIdle;
  const beast::error_code idle_ec = co_await AwaitHead();
  if (idle_ec) co_return false;  // Closed, idle too long or stopped before a head began.
  auto [ec, n] = co_await http::async_read_header(*client_, buffer_, parser, use_nothrow);
  if (ec) {
    if (Malformed(ec)) {
      co_await WriteGoServerError(ec == http::error::header_limit ? 431 : 400, ec.message());
    } else if (ec == beast::error::timeout && buffer_.size() > 0) {
      // A head begun and not finished in time (an idle kept-alive connection has nothing).
      pipeline_.stats().Refused(Refusal::kHeaderTimeout);
      log_.Log(Logger::Level::kDebug, "request head timed out",
               {{"remote", remote_}, {"received_bytes", static_cast<int64_t>(buffer_.size())}});
    }
    co_return false;
  }
  state_ = State::kBusy;
  const auto& head = parser.get();
  Http1Body body(*client_, buffer_, parser, h2_limits_->request_timeout);
  absl::Status parsed;
  Request request{head.method(),
                  head.method_string(),
                  head.target(),
                  head.version(),
                  head.keep_alive() && !stop_.requested,
                  head.base(),
                  ParseRequestInfo(head.method_string(), head.target(), &parsed),
                  remote_ip_,
                  body,
                  std::nullopt,
                  client_->is_tls() ? &client_cert_.Get() : nullptr};
  // On the heap: a watch keeps it once this frame has ended (Rest).
  auto response = std::make_unique<Http1Response>(*client_, buffer_, request, stop_);
  Exchange x{request, response.get(), stop_};
  if (!parsed.ok()) {
    response->CloseAfter();
    co_await RejectUnparsed(x, parsed);
  } else {
    co_await pipeline_.Handle(x);
  }
  if (x.detached) {
    // A watch, its head written: it goes on from ServeHttp1, and this frame (the parser, the
    // request and its head, the exchange) ends.
    response->ForgetRequest();
    *rest = std::make_unique<Rest>(
        Rest{std::move(response), std::move(x.detached), Pipeline::Record(x), body.timed_out()});
    co_return true;
  }
  pipeline_.Log(x, remote_);
  if (body.timed_out()) {
    pipeline_.stats().transport.body_timeouts_http1.fetch_add(1, std::memory_order_relaxed);
  }
  // Not reusable also when nothing could be answered at all: the connection's state is unknown.
  co_return response->reusable() && !stop_.requested;
}

bool HttpSession::EndRest(Rest& rest) {
  pipeline_.LogDetached(std::move(rest.watch), rest.record, *rest.response, remote_);
  if (rest.body_timed_out) {
    pipeline_.stats().transport.body_timeouts_http1.fetch_add(1, std::memory_order_relaxed);
  }
  return rest.response->reusable() && !stop_.requested;
}

asio::awaitable<void> HttpSession::WriteGoServerError(int code, std::string_view why) {
  // net/http's conn.serve for a request it cannot read: no Date, no length, then close.
  const std::string status =
      code == 431 ? "431 Request Header Fields Too Large" : "400 Bad Request";
  const std::string response = absl::StrCat(
      "HTTP/1.1 ", status,
      "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n", status);
  client_->tcp().expires_after(kUnparsedAnswerWriteTimeout);
  auto [ec, n] = co_await asio::async_write(*client_, asio::buffer(response), use_nothrow);
  pipeline_.LogUnparsed(remote_, code, ec ? ec.message() : std::string(why));
}

}  // namespace kf
