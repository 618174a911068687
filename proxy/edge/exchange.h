// Exchange: one request and its answer on their way through the pipeline (pipeline.h): what
// the router decided, what the filters learned (identity, admission's priority level), how it
// was answered, for the access log and the counters.
//
// Owned by the session for one request; used on the session's thread only.
#ifndef KUBE_FANOUT_EDGE_EXCHANGE_H_
#define KUBE_FANOUT_EDGE_EXCHANGE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "proxy/edge/request.h"
#include "proxy/edge/response.h"

namespace kf {

// Where the router sends a request.
enum class Route { kLocal, kCache, kPassthrough, kTunnel };

// How a request was answered in the end (a cache route may be declined and pass through).
enum class Answer { kLocal, kCache, kPassthrough, kTunnel, kCoalesced, kRejected, kCount };
std::string_view AnswerName(Answer answer);

// Connections by protocol and HTTP/2 streams; shared by every session.
struct TransportStats {
  std::atomic<int64_t> http2_connections{0};  // Open HTTP/2 connections (the rest: HTTP/1.x).
  std::atomic<int64_t> http2_streams{0};      // Open streams.
  std::atomic<uint64_t> http2_streams_total{0};
  std::atomic<uint64_t> http2_streams_reset{0};  // Ended before their answer did.
  std::atomic<uint64_t> http2_header_too_large{0};
  // Connections ended with GOAWAY for what their client did (Http2Closed), and nghttp2
  // callbacks that failed (an exception caught at the C boundary).
  std::array<std::atomic<uint64_t>, 5> http2_closed{};
  std::atomic<uint64_t> http2_callback_failures{0};
  // Streams whose client reset them before their handler started, or while it was asking
  // upstream (the call cancelled).
  std::atomic<uint64_t> http2_handlers_cancelled{0};
  // Body bytes of GET and HEAD requests, consumed and dropped (the apiserver reads none).
  std::atomic<uint64_t> http2_body_bytes_dropped{0};
  // Quiet connections' frame buffers given back to the kernel (Http2Memory::Release).
  std::atomic<uint64_t> http2_frame_buffers_released{0};
  // Request bodies not sent whole within --request-timeout: HTTP/1.1, HTTP/2.
  std::atomic<uint64_t> body_timeouts_http1{0};
  std::atomic<uint64_t> body_timeouts_h2{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Answer::kCount)> http2_answered{};
  // TLS handshakes completed: [0] full, [1] resumed (a session ticket or ID the client kept).
  std::array<std::atomic<uint64_t>, 2> tls_handshakes{};
  std::atomic<uint64_t> tls_tickets{0};  // TLS 1.3 handshakes a session ticket followed.
  // TLS 1.3 handshakes whose client closed right after its Finished, before its last flight
  // was taken (TlsServerStream::abandoned): neither finished nor refused.
  std::atomic<uint64_t> tls_handshakes_abandoned{0};
  // TLS handshakes not finished within 32 s (HttpSession; also Refusal::kTlsHandshake).
  std::atomic<uint64_t> tls_handshake_timeouts{0};
};

// Why a connection's request was refused before it could be routed: a head past the size
// limits (431) or one that does not parse (400), a head that did not arrive in time once it had
// started, a TLS handshake that failed (or timed out).
enum class Refusal {
  kHeaderTooLarge,
  kBadRequest,
  kHeaderTimeout,
  kTlsHandshake,
  kHandshakeQueue,  // Waited too long for a handshake slot (HttpSession::SetHandshakeGate).
  // A cached read answered 429 because the TokenReview or SubjectAccessReview it needed got
  // no answer in time (proxy/upstream/review_call.h).
  kTokenReviewUnavailable,
  kAccessReviewUnavailable,
  // A cached read answered 429 because its token was new and the budget for new TokenReviews
  // (--authentication-token-review-qps) was spent: not passed through for the apiserver to
  // judge, which would turn a flood of made-up tokens into one of reads at the apiserver.
  kTokenReviewThrottled,
  kCount
};
std::string_view RefusalName(Refusal refusal);

// Requests by how they were answered; shared by every session.
struct RouteStats {
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Answer::kCount)> answered{};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Refusal::kCount)> refused{};
  void Refused(Refusal why) {
    refused[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> upstream_unavailable{0};
  TransportStats transport;
  uint64_t count(Answer a) const { return answered[static_cast<size_t>(a)].load(); }
};

// Why an HTTP/2 connection was ended with GOAWAY (TransportStats::http2_closed).
// kProtocolError: nghttp2 found the client's frames malformed (a header field over its HPACK
// bound of 65,536 bytes among them) and ended the connection with GOAWAY itself.
enum class Http2Closed {
  kHeaderBlockTimeout,
  kContinuations,
  kResetRate,
  kCallbackFailure,
  kProtocolError
};

// A graceful stop reaching a request under way: `requested` is seen at the next check; a
// streaming handler sets `hook` to be woken at once (and clears it when it returns).
// `cancelled`: the client is gone before its answer (it reset its HTTP/2 stream): nothing more
// is asked upstream for it, and a handler waiting there sets `cancel_hook` to end that call.
struct StopSignal {
  bool requested = false;
  std::function<void()> hook;
  bool cancelled = false;
  std::function<void()> cancel_hook;
  void Stop() {
    requested = true;
    if (hook) hook();
  }
  void Cancel() {
    cancelled = true;
    if (cancel_hook) cancel_hook();
  }
};

// What a handler leaves running once the pipeline's stages have returned: a watch, open for
// hours, then keeps only its own state, not the request's coroutine frames (the chain's, the
// filters', the handler's: about 3 KB per watcher). The filters have nothing left to do once
// their next stage returns for a watch (admission gives a watch's seat back as it starts; the
// in-flight cap does not count watches). It writes to `response` as it is when the chain has
// returned: no filter that wraps the response (the coalescing filter's tee) runs before the
// cache handler, which is the one that detaches. Its head is written before it detaches: once
// detached it uses neither the Exchange nor the Request, so a transport may let their frames end
// too (HttpSession does: Pipeline::Handle), keeping the Response, the StopSignal and this.
class Detached {
 public:
  virtual ~Detached() = default;
  // Runs it to its end, in the caller's coroutine.
  virtual asio::awaitable<void> Run() = 0;
  // Runs it with no coroutine of the caller's: `done` is called once, from a handler on this
  // thread (never inside Start), when it is over; its handlers hold `keep` meanwhile (what owns
  // this, so that this lives until `done`).
  virtual void Start(std::shared_ptr<void> keep, std::function<void()> done) = 0;
  // Why it ended early, for the log; empty when it ended as it should.
  virtual const std::string& error() const = 0;
};

struct Exchange {
  Request& request;
  Response* response;  // Filters may wrap it (the coalescing filter keeps a copy).
  StopSignal& stop;
  Route route = Route::kPassthrough;
  Answer answer = Answer::kPassthrough;
  std::optional<Identity> user;  // Set by the identity filter, when it ran and knew.
  // Set by the identity filter: no credentials, or ones the apiserver does not accept (the
  // apiserver's system:anonymous or its 401). Neither this nor `user`: unknown (not asked, or
  // the apiserver could not be asked).
  bool unauthenticated = false;
  // Set by the identity filter: the TokenReview got no answer in time (`user` may then be a
  // stale answer): a cached read is refused at once rather than asking again.
  bool identity_unavailable = false;
  // Set by the identity filter: the token was new and not reviewed, the budget for new reviews
  // being spent: a cached read is refused at once too (proxy/serve/cache_handler.h).
  bool identity_throttled = false;
  std::string priority_level;  // Admission's, when admission ran.
  // Admission's flow (schema and key), and whether it admitted the request at the price of a
  // read answered from the cache: one the cache declines then pays the passthrough price before
  // it is relayed (proxy/filters/passthrough_charge.h).
  std::string flow_schema, flow_key;
  bool admitted_as_cached_read = false;
  // The flow schema says dropManagedFields: what the cache answers has no managedFields.
  bool drop_managed_fields = false;
  std::string upstream;  // The upstream endpoint used, for the log.
  std::string error;     // Why it ended early or was refused, for the log.
  absl::Time start = absl::Now();
  // Set by a handler (above); run by the transport after Handle (or by Pipeline::Serve).
  std::unique_ptr<Detached> detached;

  bool stopping() const { return stop.requested; }
  // Refuses the request with a Status (429, 413, ...), for the log as kRejected.
  asio::awaitable<void> Reject(const KubeStatus& status, std::string why);
};

// For the transports, which keep their request in a coroutine frame for as long as it is
// served (a watch: hours): the target's RequestInfo, or an empty one with `parsed` saying why
// not. Called outside the frame, so the frame does not also keep the StatusOr it came in.
RequestInfo ParseRequestInfo(std::string_view method, std::string_view target,
                             absl::Status* parsed);
// Refuses a request whose target did not parse (`parsed`), as the apiserver does. Its own
// coroutine: the Status it writes is not kept in the caller's frame.
asio::awaitable<void> RejectUnparsed(Exchange& x, absl::Status parsed);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_EXCHANGE_H_
