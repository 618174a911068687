#include "passthrough/passthrough.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "passthrough/hop_by_hop.h"
#include "passthrough/watch_framing.h"

namespace kf {
namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr size_t kPiece = 16 * 1024;  // One TLS record; bounds memory per relayed stream.
constexpr auto kWriteTimeout = std::chrono::seconds(60);
constexpr auto kResponseHeaderTimeout = std::chrono::seconds(60);
constexpr auto kBodyIdleTimeout = std::chrono::seconds(120);
// Longer than any watch the apiserver keeps open (its default limit is under an hour); TCP
// keep-alive notices a dead peer before then.
constexpr auto kWatchIdleTimeout = std::chrono::minutes(70);
constexpr auto kTunnelIdleTimeout = std::chrono::hours(4);
// On a graceful stop, how long the rest of an event already under way may take to arrive.
constexpr auto kStopFinishEventTimeout = std::chrono::seconds(5);

bool IgnoreNeedBuffer(beast::error_code& ec) {
  if (ec == http::error::need_buffer) ec = {};
  return !ec;
}

// The upstream request header: end-to-end fields of the client's, upstream target and Host,
// X-Forwarded-For, explicit framing. Authorization and Impersonate-* pass unchanged.
http::request<http::buffer_body> UpstreamRequestHeader(const RelayRequest& r,
                                                       const UpstreamEndpoint& ep, bool upgrade) {
  const auto& in = r.parser.get();
  http::request<http::buffer_body> out;
  out.method_string(in.method_string());
  out.target(absl::StrCat(ep.base_path, ToAbsl(in.target())));
  out.version(11);
  CopyEndToEndFields(in.base(), out.base());
  out.set(http::field::host, ep.HostHeader());
  std::string xff(in["X-Forwarded-For"]);
  out.set("X-Forwarded-For", xff.empty() ? r.remote_ip : absl::StrCat(xff, ", ", r.remote_ip));
  if (upgrade) {
    out.set(http::field::connection, "Upgrade");
    out.set(http::field::upgrade, in[http::field::upgrade]);
  }
  if (r.parser.chunked()) out.chunked(true);
  return out;
}

bool ResponseHasBody(int status, bool head) {
  return !head && status >= 200 && status != 204 && status != 304;
}

asio::awaitable<beast::error_code> CopyStream(AnyStream& from, AnyStream& to) {
  std::array<char, kPiece> buf;
  for (;;) {
    from.tcp().expires_after(kTunnelIdleTimeout);
    auto [rec, n] = co_await from.async_read_some(asio::buffer(buf), use_nothrow);
    if (rec) co_return rec;
    to.tcp().expires_after(kWriteTimeout);
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), use_nothrow);
    if (wec) co_return wec;
  }
}

// After a 101: the bytes each side already sent past the headers, then both directions until
// either ends.
asio::awaitable<void> Tunnel(AnyStream& client, beast::flat_buffer& client_buf, AnyStream& up,
                             beast::flat_buffer& up_buf) {
  using namespace asio::experimental::awaitable_operators;
  if (up_buf.size() > 0) {
    auto [ec, n] = co_await asio::async_write(client, up_buf.data(), use_nothrow);
    if (ec) co_return;
    up_buf.consume(n);
  }
  if (client_buf.size() > 0) {
    auto [ec, n] = co_await asio::async_write(up, client_buf.data(), use_nothrow);
    if (ec) co_return;
    client_buf.consume(n);
  }
  co_await (CopyStream(client, up) || CopyStream(up, client));
}

// Sends the request header and streams the client's body to the upstream. `body_write_failed`:
// the header went out but writing the body to the upstream failed, which is how an upstream that
// answers before reading the body (the apiserver refusing a request, then closing) looks from
// here; its answer may still be waiting to be read.
asio::awaitable<beast::error_code> SendRequest(RelayRequest& r, AnyStream& up,
                                               http::request<http::buffer_body>& req,
                                               bool* body_write_failed) {
  *body_write_failed = false;
  http::request_serializer<http::buffer_body> sr(req);
  std::array<char, kPiece> buf;
  req.body().data = nullptr;
  req.body().more = !r.parser.is_done() || (r.body != nullptr && !r.body->empty());
  up.tcp().expires_after(kWriteTimeout);
  auto [hec, hn] = co_await http::async_write_header(up, sr, use_nothrow);
  if (hec) co_return hec;
  if (r.body != nullptr && !r.body->empty()) {
    req.body().data = const_cast<char*>(r.body->data());  // Beast's buffer_body is mutable.
    req.body().size = r.body->size();
    req.body().more = false;
    up.tcp().expires_after(kWriteTimeout);
    auto [wec, wn] = co_await http::async_write(up, sr, use_nothrow);
    *body_write_failed = !IgnoreNeedBuffer(wec);
    if (*body_write_failed) co_return wec;
  }
  while (!r.parser.is_done()) {
    r.parser.get().body().data = buf.data();
    r.parser.get().body().size = buf.size();
    r.client.tcp().expires_after(kBodyIdleTimeout);
    auto [rec, rn] =
        co_await http::async_read_some(r.client, r.client_buffer, r.parser, use_nothrow);
    if (!IgnoreNeedBuffer(rec)) co_return rec;
    req.body().data = buf.data();
    req.body().size = buf.size() - r.parser.get().body().size;
    req.body().more = !r.parser.is_done();
    if (req.body().size == 0 && req.body().more) continue;
    if (req.body().size == 0) req.body().data = nullptr;
    up.tcp().expires_after(kWriteTimeout);
    auto [wec, wn] = co_await http::async_write(up, sr, use_nothrow);
    *body_write_failed = !IgnoreNeedBuffer(wec);
    if (*body_write_failed) co_return wec;
  }
  if (!sr.is_done()) {
    req.body().data = nullptr;
    req.body().more = false;
    auto [wec, wn] = co_await http::async_write(up, sr, use_nothrow);
    *body_write_failed = !IgnoreNeedBuffer(wec);
    if (*body_write_failed) co_return wec;
  }
  co_return beast::error_code{};
}

// The response body relay of one request, piece by piece.
struct BodyRelay {
  RelayRequest& r;
  AnyStream& up;
  beast::flat_buffer& up_buf;
  BoundedParser<false, http::buffer_body>& rp;
  http::response<http::buffer_body>& res;
  http::response_serializer<http::buffer_body>& sr;
  bool watch;
  RelayOutcome& out;
  WatchFraming framing{WatchFraming::Format::kUnframed};
  bool upstream_clean = true;  // The upstream connection may be reused.
  bool failed = false;         // The relay ended early; the client connection must close.
};

asio::awaitable<void> PumpBody(BodyRelay& b) {
  RelayRequest& r = b.r;
  std::array<char, kPiece> buf;
  while (!b.rp.is_done()) {
    if (r.stopping && b.watch && b.framing.AtBoundary()) {
      b.upstream_clean = false;  // The rest of the upstream stream is abandoned.
      break;
    }
    b.rp.get().body().data = buf.data();
    b.rp.get().body().size = buf.size();
    b.up.tcp().expires_after(!b.watch     ? std::chrono::seconds(kBodyIdleTimeout)
                             : r.stopping ? std::chrono::seconds(kStopFinishEventTimeout)
                                          : std::chrono::seconds(kWatchIdleTimeout));
    auto [rec, rn] = co_await http::async_read_some(b.up, b.up_buf, b.rp, use_nothrow);
    if (!IgnoreNeedBuffer(rec)) {
      if (r.stopping && b.watch && b.framing.AtBoundary()) {
        b.upstream_clean = false;
        break;
      }
      // The upstream failed mid-body: the client sees its stream cut, as it would have.
      b.out.error = absl::StrCat("upstream ", b.out.upstream, ": ", rec.message());
      b.failed = true;
      co_return;
    }
    std::string_view piece(buf.data(), buf.size() - b.rp.get().body().size);
    if (piece.empty()) continue;
    if (r.stopping && b.watch) {
      if (const size_t end = b.framing.PrefixToBoundary(piece); end != std::string_view::npos) {
        piece = piece.substr(0, end);
        b.upstream_clean = false;
      }
    }
    b.res.body().data = const_cast<char*>(piece.data());
    b.res.body().size = piece.size();
    b.res.body().more = true;
    r.client.tcp().expires_after(kWriteTimeout);
    auto [bec, bn] = co_await http::async_write(r.client, b.sr, use_nothrow);
    if (!IgnoreNeedBuffer(bec)) {
      b.out.error = absl::StrCat("client: ", bec.message());
      b.failed = true;
      co_return;
    }
    b.framing.Consume(piece);
    b.out.bytes_out += piece.size();
    if (CapturedResponse* c = r.capture; c != nullptr) {
      if (c->body.size() + piece.size() <= c->limit) {
        c->body.append(piece);
      } else {
        r.capture = nullptr;  // Too big to share: the followers go upstream themselves.
      }
    }
    if (!b.upstream_clean) break;
  }
  b.res.body().data = nullptr;
  b.res.body().more = false;
  r.client.tcp().expires_after(kWriteTimeout);
  auto [fec, fn] = co_await http::async_write(r.client, b.sr, use_nothrow);
  if (!IgnoreNeedBuffer(fec)) {
    b.out.error = absl::StrCat("client: ", fec.message());
    b.failed = true;
  }
}

// Completes when the client ends its side (or fails), after cancelling the upstream stream.
// Bytes the client sends meanwhile (a pipelined request) are kept in `buffer`.
asio::awaitable<void> CancelWhenClientLeaves(AnyStream& client, beast::flat_buffer& buffer,
                                             AnyStream& up, bool* left) {
  for (;;) {
    client.tcp().expires_never();
    auto [ec, n] = co_await client.async_read_some(buffer.prepare(4096), use_nothrow);
    if (ec) {
      if (ec != asio::error::operation_aborted) {
        *left = true;
        up.Cancel();
      }
      co_return;
    }
    buffer.commit(n);
  }
}

}  // namespace

asio::awaitable<RelayOutcome> Relay(RelayRequest& r) {
  RelayOutcome out;
  const auto& in = r.parser.get();
  const bool upgrade = IsUpgradeRequest(in.base());
  const bool head = in.method() == http::verb::head;
  const bool watch = r.info.verb == "watch";
  const bool has_body = !r.parser.is_done();

  // Send the request and read the response header. A reused keep-alive connection may have
  // been closed by the upstream while idle; a request without a body is then sent once more on
  // a fresh connection (nothing of it was consumed).
  UpstreamPool::Lease lease;
  beast::flat_buffer up_buf;
  std::optional<BoundedParser<false, http::buffer_body>> rp;
  bool request_sent = false;  // Else the upstream answered before taking the whole body.
  for (int attempt = 0;; ++attempt) {
    auto acquired = co_await r.pool.Acquire(/*allow_reuse=*/attempt == 0 && !upgrade);
    if (!acquired.ok()) {
      out.error = std::string(acquired.status().message());
      co_return out;
    }
    lease = *std::move(acquired);
    out.upstream = r.pool.endpoint(lease.endpoint).Url();
    AnyStream& up = *lease.stream;
    http::request<http::buffer_body> req =
        UpstreamRequestHeader(r, r.pool.endpoint(lease.endpoint), upgrade);
    bool body_write_failed = false;
    beast::error_code ec = co_await SendRequest(r, up, req, &body_write_failed);
    request_sent = !ec;
    if (!ec || (body_write_failed && !upgrade)) {
      up_buf.clear();
      rp.emplace();
      rp->body_limit(boost::none);
      rp->header_limit(1024 * 1024);
      if (head) rp->skip(true);
      up.tcp().expires_after(kResponseHeaderTimeout);
      auto [hec, hn] = co_await http::async_read_header(up, up_buf, *rp, use_nothrow);
      ec = hec;
    }
    if (!ec) break;
    if (!(lease.reused && !has_body && !r.stopping)) {
      out.error = absl::StrCat("upstream ", out.upstream, ": ", ec.message());
      co_return out;
    }
  }
  AnyStream& up = *lease.stream;
  const auto& upres = rp->get();
  const int status = static_cast<int>(upres.result_int());

  if (upgrade && status == 101) {
    http::response<http::empty_body> res;
    res.result(http::status::switching_protocols);
    res.reason(upres.reason());
    res.version(11);
    CopyEndToEndFields(upres.base(), res.base());
    res.set(http::field::connection, "Upgrade");
    res.set(http::field::upgrade, upres[http::field::upgrade]);
    http::response_serializer<http::empty_body> sr(res);
    r.client.tcp().expires_after(kWriteTimeout);
    auto [wec, wn] = co_await http::async_write_header(r.client, sr, use_nothrow);
    out.status = 101;
    if (!wec) {
      out.upgraded = true;
      co_await Tunnel(r.client, r.client_buffer, up, up_buf);
    }
    co_return out;
  }

  http::response<http::buffer_body> res;
  res.result(upres.result_int());
  res.reason(upres.reason());
  res.version(in.version() == 10 ? 10 : 11);
  CopyEndToEndFields(upres.base(), res.base());
  const bool body = ResponseHasBody(status, head) && !rp->is_done();
  // A client whose body was not all read cannot send its next request on this connection (Go's
  // server closes it too when a handler answers without reading the body).
  bool keep_alive = in.keep_alive() && !r.stopping && r.parser.is_done();
  if (ResponseHasBody(status, head) && !rp->content_length()) {
    // Unknown length (chunked upstream, e.g. every watch): chunk it again for HTTP/1.1 clients,
    // end it by closing for HTTP/1.0 ones.
    if (res.version() == 11) {
      res.chunked(true);
    } else {
      keep_alive = false;
    }
  }
  res.keep_alive(keep_alive);
  res.body().data = nullptr;
  res.body().more = body;
  if (r.capture != nullptr) {
    r.capture->status = upres.result_int();
    r.capture->reason = std::string(upres.reason());
    CopyEndToEndFields(upres.base(), r.capture->fields);
    r.capture->fields.erase(http::field::content_length);
    r.capture->fields.erase(http::field::transfer_encoding);
  }
  http::response_serializer<http::buffer_body> sr(res);
  r.client.tcp().expires_after(kWriteTimeout);
  // Headers go out now, before any body: a watch's client learns at once that it is open.
  auto [hec, hn] = co_await http::async_write_header(r.client, sr, use_nothrow);
  out.status = status;
  if (hec) {
    out.error = absl::StrCat("client: ", hec.message());
    co_return out;
  }

  BodyRelay b{r, up, up_buf, *rp, res, sr, watch, out};
  if (body) {
    // On a graceful stop a watch ends between two events: at once when the stream is at an
    // event boundary (the pending upstream read is cancelled), else after forwarding the rest
    // of the event in flight.
    if (watch) {
      r.stop_hook = [&b, &up] {
        if (b.framing.AtBoundary()) up.Cancel();
      };
    }
    struct ClearHook {
      std::function<void()>& hook;
      ~ClearHook() { hook = nullptr; }
    } clear_hook{r.stop_hook};
    b.framing = WatchFraming(WatchFraming::ForContentType(upres[http::field::content_type]));
    if (watch) {
      // A quiet watch whose client went away must not hold its upstream watch open until the
      // next event happens to fail the write: notice the client's end and cancel.
      using namespace asio::experimental::awaitable_operators;
      bool client_left = false;
      co_await (PumpBody(b) || CancelWhenClientLeaves(r.client, r.client_buffer, up, &client_left));
      if (client_left) out.error = "client closed";
      keep_alive = false;  // The client's read side was in use; start afresh.
    } else {
      co_await PumpBody(b);
    }
    if (b.failed) co_return out;
  }
  out.client_reusable = keep_alive;  // False already for a close-delimited body.
  if (r.capture != nullptr && rp->is_done()) r.capture->complete = true;
  if (b.upstream_clean && request_sent && rp->is_done() && upres.keep_alive()) {
    up.tcp().expires_never();
    r.pool.Release(std::move(lease));
  }
  co_return out;
}

}  // namespace kf
