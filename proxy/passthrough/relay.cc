#include "proxy/passthrough/relay.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/api/watch_framing.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/edge/hop_by_hop.h"
#include "proxy/edge/request_parser.h"
#include "proxy/passthrough/relay_answer.h"
#include "proxy/passthrough/tunnel.h"
#include "proxy/passthrough/upstream_request.h"
#include "proxy/upstream/vouched.h"

namespace kf {
namespace {

namespace http = beast::http;
constexpr auto kResponseHeaderTimeout = std::chrono::seconds(60);

// One call upstream: the connection, what was read past the response head, the parser.
struct UpstreamCall {
  UpstreamPool::Lease lease;
  beast::flat_buffer buffer;
  std::optional<BoundedParser<false, http::buffer_body>> parser;
  bool request_sent = false;  // Else the upstream answered before taking the whole body.
  AnyStream& stream() { return *lease.stream; }
  const http::response<http::buffer_body>& head() { return parser->get(); }
};

asio::awaitable<beast::error_code> ReadHead(UpstreamCall& call, bool head_request) {
  call.buffer.clear();
  call.parser.emplace();
  call.parser->body_limit(boost::none);
  call.parser->header_limit(1024 * 1024);
  if (head_request) call.parser->skip(true);
  call.stream().tcp().expires_after(kResponseHeaderTimeout);
  auto [ec, n] =
      co_await http::async_read_header(call.stream(), call.buffer, *call.parser, use_nothrow);
  co_return ec;
}

// Sends the request and reads the response head. A reused keep-alive connection may have been
// closed by the upstream while idle; a request without a body is then sent once more on a
// fresh connection (nothing of it was consumed). False: no answer; x.error says why, or
// *refused when the head could not be written at all (upstream_request.h).
asio::awaitable<bool> Open(Exchange& x, UpstreamPool& pool, bool upgrade,
                           const RequestHeaderNames& names, const Identity* as_user,
                           UpstreamCall& call, absl::Status* refused) {
  const bool has_body = !x.request.body.done();
  for (int attempt = 0;; ++attempt) {
    // A client that reset its stream (before or while a connection was found) asks nothing.
    if (x.stop.cancelled) {
      x.error = "client reset the stream";
      co_return false;
    }
    auto acquired = co_await pool.Acquire(/*allow_reuse=*/attempt == 0 && !upgrade);
    if (!acquired.ok()) {
      x.error = std::string(acquired.status().message());
      co_return false;
    }
    call.lease = *std::move(acquired);
    if (x.stop.cancelled) continue;  // The check above ends it; the lease is dropped.
    const UpstreamEndpoint& endpoint = pool.endpoint(call.lease.endpoint);
    x.upstream = endpoint.Url();
    auto head = UpstreamRequestHead(x.request, endpoint, upgrade, names, as_user);
    if (!head.ok()) {
      // Nothing was written: the lease goes back unused.
      pool.Release(std::move(call.lease));
      *refused = head.status();
      co_return false;
    }
    auto& req = *head;
    bool body_write_failed = false;
    beast::error_code ec = co_await SendRequest(x.request, call.stream(), req, &body_write_failed);
    call.request_sent = !ec;
    if (!ec || (body_write_failed && !upgrade)) {
      ec = co_await ReadHead(call, x.request.method == http::verb::head);
    }
    if (!ec) co_return true;
    if (call.lease.reused) pool.FailedInUse();
    if (!(call.lease.reused && !has_body && !x.stopping() && !x.stop.cancelled)) {
      x.error = absl::StrCat("upstream ", x.upstream, ": ", ec.message());
      co_return false;
    }
  }
}

class Http1UpstreamBody final : public UpstreamBody {
 public:
  explicit Http1UpstreamBody(UpstreamCall& call) : call_(call) {}
  bool done() const override { return call_.parser->is_done(); }
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(
      std::span<char> into, std::chrono::seconds timeout) override {
    auto& rp = *call_.parser;
    rp.get().body().data = into.data();
    rp.get().body().size = into.size();
    call_.stream().tcp().expires_after(timeout);
    auto [ec, n] = co_await http::async_read_some(call_.stream(), call_.buffer, rp, use_nothrow);
    if (ec == http::error::need_buffer) ec = {};
    co_return std::pair{ec, into.size() - rp.get().body().size};
  }
  void Cancel() override { call_.stream().Cancel(); }

 private:
  UpstreamCall& call_;
};

// HTTP/1.1: the connection goes back to the pool when the exchange ended cleanly.
asio::awaitable<void> RelayResponse(Exchange& x, UpstreamPool& pool, UpstreamCall& call) {
  const auto& upres = call.head();
  Http1UpstreamBody body(call);
  std::optional<uint64_t> length;
  if (auto l = call.parser->content_length()) length = *l;
  const bool clean =
      co_await RelayAnswer(x,
                           AnswerHead(static_cast<int>(upres.result_int()),
                                      std::string(upres.reason()), upres.base(), length),
                           body);
  if (clean && call.request_sent && call.parser->is_done() && upres.keep_alive()) {
    call.stream().tcp().expires_never();
    pool.Release(std::move(call.lease));
  }
}

// HTTP/2: a request without a body on a connection shared with others (UpstreamPool::
// AcquireHttp2), its answer's head read. False: no answer (x.error says why, or *refused when
// the head could not be written), or *fallback: the upstream does not speak HTTP/2 (use
// HTTP/1.1). A stream the server refused unprocessed (its GOAWAY) is sent again.
asio::awaitable<bool> OpenHttp2(Exchange& x, UpstreamPool& pool, const RequestHeaderNames& names,
                                const Identity* as_user,
                                std::unique_ptr<Http2UpstreamStream>& stream, absl::Status* refused,
                                bool* fallback) {
  for (int attempt = 0;; ++attempt) {
    if (x.stop.cancelled) {
      x.error = "client reset the stream";
      co_return false;
    }
    auto acquired = co_await pool.AcquireHttp2();
    if (!acquired.ok()) {
      x.error = std::string(acquired.status().message());
      co_return false;
    }
    if (*acquired == nullptr) {
      *fallback = true;
      co_return false;
    }
    if (x.stop.cancelled) continue;
    Http2Upstream& connection = **acquired;
    const UpstreamEndpoint& endpoint = pool.endpoint(connection.endpoint());
    x.upstream = endpoint.Url();
    auto head = UpstreamRequestHead(x.request, endpoint, /*upgrade=*/false, names, as_user);
    if (!head.ok()) {
      *refused = head.status();
      co_return false;
    }
    absl::StatusOr<Http2HeaderList> fields = Http2RequestHead(*head, endpoint.tls);
    if (!fields.ok()) {
      *refused = fields.status();
      co_return false;
    }
    // No suspension since AcquireHttp2: the room it found is this request's.
    stream = connection.Submit(*fields);
    if (stream != nullptr) {
      const beast::error_code ec =
          co_await stream->ReadHead(std::chrono::steady_clock::now() + kResponseHeaderTimeout);
      if (!ec) co_return true;
      x.error = x.stop.cancelled ? std::string("client reset the stream")
                                 : absl::StrCat("upstream ", x.upstream, ": ", ec.message());
      if (!stream->refused()) co_return false;
    }
    stream.reset();
    if (attempt >= 2 || x.stopping()) {
      if (x.error.empty()) x.error = absl::StrCat("upstream ", x.upstream, ": stream refused");
      co_return false;
    }
  }
}

asio::awaitable<void> SwitchProtocols(Exchange& x, UpstreamCall& call) {
  const auto& upres = call.head();
  ResponseHead head;
  head.status = 101;
  head.reason = std::string(upres.reason());
  CopyEndToEndFields(upres.base(), head.fields);
  head.fields.set(http::field::connection, "Upgrade");
  head.fields.set(http::field::upgrade, upres[http::field::upgrade]);
  if (auto ec = co_await x.response->WriteHead(std::move(head))) {
    x.error = absl::StrCat("client: ", ec.message());
    co_return;
  }
  if (auto client = x.response->TakeUpgraded()) {
    co_await Tunnel(*std::move(client), call.stream(), call.buffer);
  }
}

}  // namespace

asio::awaitable<bool> Relay::Serve(Exchange& x) {
  // A user the connection vouches for (a front proxy's fields, a client certificate's) goes
  // through kube-fanout's own front proxy, named in its request-header fields.
  const Vouched vouched = Vouch(x.request, names_);
  if (vouched.by == Vouched::By::kRejectedCertificate) {
    // The apiserver's answer to a certificate its x509 authenticator refuses, with nothing
    // else to authenticate the request (an error there is not anonymous); also to an identity
    // that could not be carried upstream unchanged (vouched.h).
    const KubeStatus unauthorized{401, "Unauthorized", "Unauthorized"};
    co_await x.Reject(unauthorized, vouched.why);
    co_return true;
  }
  const bool as_cert = vouched.asserted();
  const bool events = x.request.info.IsEvents();
  UpstreamPool* pool = as_cert ? (events ? pools_.events_front_pool : pools_.front_pool)
                               : (events ? pools_.events_pool : pools_.pool);
  if (pool == nullptr) pool = events ? pools_.events_pool : pools_.pool;  // No front proxy set.
  const Identity* as_user = as_cert ? &vouched.user : nullptr;
  const bool upgrade = x.route == Route::kTunnel;
  absl::Status refused;
  bool opened = false;
  // A request without a body or an upgrade shares an HTTP/2 connection with others.
  const bool bodiless =
      x.request.body.done() && (!x.request.whole_body || x.request.whole_body->empty());
  if (!upgrade && bodiless && pool->http2()) {
    std::unique_ptr<Http2UpstreamStream> stream;
    // A client that resets its stream resets the upstream one (rapid resets must not become
    // upstream work).
    x.stop.cancel_hook = [&stream] {
      if (stream) stream->Cancel();
    };
    absl::Cleanup clear_cancel_hook = [&x] { x.stop.cancel_hook = nullptr; };
    bool fallback = false;
    opened = co_await OpenHttp2(x, *pool, names_, as_user, stream, &refused, &fallback);
    if (opened) {
      co_await RelayHttp2Response(x, *stream);
      co_return true;
    }
    if (!fallback) co_return co_await Unanswered(x, refused);
  }
  UpstreamCall call;
  // A client that resets its stream ends the upstream call with it: the apiserver sees its
  // connection close and stops the request (rapid resets must not become upstream work).
  x.stop.cancel_hook = [&call] {
    beast::error_code ignored;
    if (call.lease.stream) call.stream().tcp().socket().close(ignored);
  };
  absl::Cleanup clear_cancel_hook = [&x] { x.stop.cancel_hook = nullptr; };
  opened = co_await Open(x, *pool, upgrade, names_, as_user, call, &refused);
  if (!opened) co_return co_await Unanswered(x, refused);
  if (upgrade && call.head().result_int() == 101) {
    co_await SwitchProtocols(x, call);
  } else {
    co_await RelayResponse(x, *pool, call);
  }
  co_return true;
}

// No answer from the upstream: why, as the apiserver would say it.
asio::awaitable<bool> Relay::Unanswered(Exchange& x, const absl::Status& refused) {
  if (!refused.ok()) {
    // A head that would carry bytes HTTP forbids is never written: the client's own (400
    // BadRequest, as the apiserver's server refuses such a head), or an identity that could not
    // be asserted (500: vouched identities are checked before this).
    // Named: a temporary bound to Reject's reference inside co_await is what GCC 12 may free
    // twice.
    const KubeStatus status = ToKubeStatus(refused);
    co_await x.Reject(status, std::string(refused.message()));
    co_return true;
  }
  if (x.request.body.timed_out()) {
    // The client's body did not come within the request timeout: the apiserver, reading the
    // same body, answers this when its own request timeout passes.
    x.response->CloseAfter();
    const KubeStatus status = RequestTimeoutStatus();
    x.error = "request body not sent in time";
    co_await WriteStatus(*x.response, status);
    co_return true;
  }
  // Nothing reached the client yet: say why, as a Status, and end the connection (its request
  // body may be half read).
  x.response->CloseAfter();
  KubeStatus status{503, "ServiceUnavailable",
                    absl::StrCat("kube-fanout could not reach the upstream apiserver: ", x.error),
                    1};
  co_await WriteStatus(*x.response, status);
  co_return true;
}

}  // namespace kf
