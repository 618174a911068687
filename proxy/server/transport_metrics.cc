#include "proxy/server/transport_metrics.h"

#include <algorithm>
#include <string>

namespace kf {
namespace {

using metrics::Label;
using metrics::Writer;

// The log says "reject"; the metric's label has always said "rejected".
std::string RouteLabel(Answer answer) {
  return Label("route", answer == Answer::kRejected ? "rejected" : AnswerName(answer));
}

// Connections by protocol and HTTP/2 streams (proxy/edge/http2_session.h has the limits).
void RenderTransport(Writer& w, const TransportStats& t, int64_t open_connections) {
  const auto h2 = t.http2_connections.load();
  w.Family("kube_fanout_connections", "gauge", "Client connections open, by protocol.");
  w.Sample("kube_fanout_connections", Label("protocol", "http/1.1"),
           static_cast<double>(std::max<int64_t>(0, open_connections - h2)));
  w.Sample("kube_fanout_connections", Label("protocol", "h2"), static_cast<double>(h2));
  w.Single("kube_fanout_http2_streams", "gauge",
           "HTTP/2 streams open (at most 100 per connection, as the apiserver).",
           static_cast<double>(t.http2_streams.load()));
  w.Single("kube_fanout_http2_streams_total", "counter", "HTTP/2 streams opened by clients.",
           static_cast<double>(t.http2_streams_total.load()));
  w.Single("kube_fanout_http2_streams_reset_total", "counter",
           "HTTP/2 streams that ended before their answer did (reset by the client, cut for "
           "slowness, or with their connection).",
           static_cast<double>(t.http2_streams_reset.load()));
  w.Single("kube_fanout_http2_header_too_large_total", "counter",
           "HTTP/2 requests refused 431 for a header list past 1 MiB (+320).",
           static_cast<double>(t.http2_header_too_large.load()));
  w.Family("kube_fanout_http2_connections_closed_total", "counter",
           "HTTP/2 connections ended with GOAWAY for what their client did: a header block not "
           "ended in time, too many CONTINUATION frames, resets past the rate limit, a "
           "callback that failed, or frames nghttp2 refused (protocol_error: a header field over "
           "65,536 bytes among them).");
  static constexpr std::string_view kClosed[] = {
      "header_block_timeout", "continuations", "reset_rate", "callback_failure", "protocol_error"};
  for (size_t i = 0; i < std::size(kClosed); ++i) {
    w.Sample("kube_fanout_http2_connections_closed_total", Label("reason", kClosed[i]),
             static_cast<double>(t.http2_closed[i].load()));
  }
  w.Single("kube_fanout_http2_callback_failures_total", "counter",
           "nghttp2 callbacks and HTTP/2 handlers that failed with an exception (stopped at the "
           "boundary).",
           static_cast<double>(t.http2_callback_failures.load()));
  w.Single("kube_fanout_http2_handlers_cancelled_total", "counter",
           "HTTP/2 requests whose client reset the stream before or while they were served: not "
           "started, or their upstream call ended.",
           static_cast<double>(t.http2_handlers_cancelled.load()));
  w.Single("kube_fanout_http2_request_body_dropped_bytes_total", "counter",
           "Body bytes sent with HTTP/2 GET and HEAD requests, consumed and dropped.",
           static_cast<double>(t.http2_body_bytes_dropped.load()));
  w.Single("kube_fanout_http2_frame_buffers_released_total", "counter",
           "Times a quiet HTTP/2 connection gave the pages of its 16 KiB frame buffer back to the "
           "kernel (--http2-frame-buffer-release-after), to be touched again by its next frame.",
           static_cast<double>(t.http2_frame_buffers_released.load()));
}

// TLS handshakes on --secure-listen.
void RenderTls(Writer& w, const TransportStats& t) {
  w.Family("kube_fanout_tls_handshakes_total", "counter",
           "TLS handshakes completed on --secure-listen, by whether the client resumed an "
           "earlier session (a TLS 1.3 ticket, a TLS 1.2 ticket or session ID).");
  w.Sample("kube_fanout_tls_handshakes_total", Label("resumed", "false"),
           static_cast<double>(t.tls_handshakes[0].load()));
  w.Sample("kube_fanout_tls_handshakes_total", Label("resumed", "true"),
           static_cast<double>(t.tls_handshakes[1].load()));
  w.Single("kube_fanout_tls_session_tickets_total", "counter",
           "TLS 1.3 handshakes on --secure-listen after which a session ticket was sent: only "
           "to clients whose ClientHello offers a resumption mode (psk_dhe_ke), as Go's server "
           "decides; client-go offers none.",
           static_cast<double>(t.tls_tickets.load()));
  w.Single("kube_fanout_tls_handshakes_abandoned_total", "counter",
           "TLS 1.3 handshakes on --secure-listen whose client closed the connection right "
           "after its Finished, before kube-fanout took its last flight, as Go's transport "
           "closes the extra connections it dials for concurrent first requests: left there, "
           "the client's certificate and signature unchecked (not counted as refused).",
           static_cast<double>(t.tls_handshakes_abandoned.load()));
  w.Single("kube_fanout_tls_handshake_timeouts_total", "counter",
           "TLS handshakes on --secure-listen not finished within 32 s (also counted in "
           "kube_fanout_requests_refused_total{reason=\"tls_handshake\"}).",
           static_cast<double>(t.tls_handshake_timeouts.load()));
}

// Request bodies cut for time, and HTTP/2 requests by how they were answered.
void RenderTransportEndings(Writer& w, const TransportStats& t) {
  w.Family("kube_fanout_request_body_timeouts_total", "counter",
           "Request bodies not sent whole within 60 s of their head (the apiserver's "
           "--request-timeout), by protocol: the read was ended, an Event creation answered 504 "
           "Timeout, a passed-through request ended (HTTP/2: its stream reset).");
  w.Sample("kube_fanout_request_body_timeouts_total", Label("protocol", "http/1.1"),
           static_cast<double>(t.body_timeouts_http1.load()));
  w.Sample("kube_fanout_request_body_timeouts_total", Label("protocol", "h2"),
           static_cast<double>(t.body_timeouts_h2.load()));
  w.Family("kube_fanout_http2_requests_total", "counter",
           "Requests served over HTTP/2, by how they were answered.");
  for (size_t i = 0; i < static_cast<size_t>(Answer::kCount); ++i) {
    w.Sample("kube_fanout_http2_requests_total", RouteLabel(static_cast<Answer>(i)),
             static_cast<double>(t.http2_answered[i].load()));
  }
}

}  // namespace

void RenderRouteMetrics(metrics::Writer& w, const RouteStats& routes, int64_t open_connections) {
  w.Family("kube_fanout_requests_total", "counter", "Requests by how they were answered.");
  for (size_t i = 0; i < static_cast<size_t>(Answer::kCount); ++i) {
    w.Sample("kube_fanout_requests_total", RouteLabel(static_cast<Answer>(i)),
             static_cast<double>(routes.count(static_cast<Answer>(i))));
  }
  w.Family("kube_fanout_requests_refused_total", "counter",
           "Requests refused before they could be routed or served, by reason "
           "(header_too_large: 431; bad_request: 400, a head that does not parse; "
           "header_timeout: a head begun and not finished within 30 s; tls_handshake: a TLS "
           "handshake that failed or took over 32 s, TCP-only probes included; "
           "handshake_queue: a TLS connection closed unhandshaken because its client had left "
           "by the time its I/O thread reached it, over 1 s after it was accepted; "
           "token_review_unavailable, "
           "access_review_unavailable: a cached read answered 429 because the TokenReview or "
           "SubjectAccessReview it needed got no answer in time; token_review_throttled: a cached "
           "read answered 429 because its token was new and the budget for new TokenReviews, "
           "--authentication-token-review-qps, was spent). The 431s, 400s and 429s also "
           "count in kube_fanout_requests_total{route=\"rejected\"}.");
  for (size_t i = 0; i < static_cast<size_t>(Refusal::kCount); ++i) {
    w.Sample("kube_fanout_requests_refused_total",
             Label("reason", RefusalName(static_cast<Refusal>(i))),
             static_cast<double>(routes.refused[i].load(std::memory_order_relaxed)));
  }
  w.Single("kube_fanout_upstream_unavailable_total", "counter",
           "Requests answered 503 because no upstream endpoint answered.",
           static_cast<double>(routes.upstream_unavailable.load()));
  w.Single("kube_fanout_open_connections", "gauge", "Client connections open.",
           static_cast<double>(open_connections));
  RenderTransport(w, routes.transport, open_connections);
  RenderTls(w, routes.transport);
  RenderTransportEndings(w, routes.transport);
}

}  // namespace kf
