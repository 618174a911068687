// HttpSession: one client connection (plain or TLS). HTTP/2 when TLS chose "h2" by ALPN or a
// plain connection starts with HTTP/2's preface: then an Http2Session serves it. Otherwise
// HTTP/1.x: reads requests one after another
// (keep-alive), turns each into a Request (RequestInfo parsed once) and an Http1Response, and
// hands them to the worker's Pipeline; the session itself only frames, times and ends the
// connection. A head it cannot parse gets Go's server's answer (400 or 431) and the
// connection closes.
//
// Lives on one worker thread for life: created there, registered in its SessionSet, kept alive
// by its Run() coroutine (shared_from_this). Stop() is called on that thread.
#ifndef KUBE_FANOUT_EDGE_HTTP_SESSION_H_
#define KUBE_FANOUT_EDGE_HTTP_SESSION_H_

#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/client_cert.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/exchange.h"
#include "proxy/edge/http2_session.h"
#include "proxy/edge/pipeline.h"
#include "proxy/edge/session_set.h"

namespace kf {

class HttpSession : public std::enable_shared_from_this<HttpSession>, public Stoppable {
 public:
  HttpSession(std::unique_ptr<AnyStream> client, std::string remote, Pipeline& pipeline,
              SessionSet& sessions, std::atomic<int64_t>& active_sessions, const Logger& log);
  ~HttpSession() override;
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void Start(const asio::any_io_executor& executor);
  // The HTTP/2 settings a connection that turns out to speak HTTP/2 gets (before Start).
  void SetHttp2Limits(SharedHttp2Limits limits) { h2_limits_ = std::move(limits); }
  void SetHttp2Limits(const Http2Limits& limits) {
    h2_limits_ = std::make_shared<const Http2Limits>(limits);
  }
  // A TLS connection whose session starts (its turn on this thread) more than `max_wait` after
  // `accepted` and whose client has meanwhile closed it (client-go gives up a handshake after
  // 10 s) is closed without a handshake: its millisecond of CPU goes to the clients still
  // waiting (refused: handshake_queue). A client still there gets its handshake however long
  // it waited, as Go's server in the apiserver gives it.
  // `pending` counts the connections accepted for this thread whose session has not started
  // (the accept loop stops accepting while it is high); the session takes itself off it.
  // Before Start; without it, every handshake is attempted.
  void SetHandshakeGate(std::chrono::steady_clock::time_point accepted,
                        std::chrono::milliseconds max_wait, std::atomic<int64_t>* pending) {
    gated_ = true;
    accepted_ = accepted;
    handshake_max_wait_ = max_wait;
    handshake_pending_ = pending;
  }
  // How long a request head may take (Go's server in the apiserver: ReadHeaderTimeout and
  // IdleTimeout). `header`: one deadline for a whole head, never extended by the bytes that
  // come: from the end of the TLS handshake (a plain connection: from its start) for the
  // connection's first request, from its first byte for a kept-alive connection's next one.
  // `idle`: how long a kept-alive connection may wait for that first byte.
  struct HeadTimeouts {
    std::chrono::milliseconds header{kHeadTimeout};
    std::chrono::milliseconds idle{kKeepAliveIdleTimeout};
  };
  // Before Start (tests shorten them).
  void SetHeadTimeouts(const HeadTimeouts& timeouts) { head_timeouts_ = timeouts; }
  // Graceful stop: a connection waiting for its next request closes now, a watch ends cleanly
  // now (at an event boundary, its stream terminated), any other request finishes and its
  // answer says Connection: close.
  void Stop() override;

 private:
  enum class State { kStarting, kIdle, kBusy };

  asio::awaitable<void> Run();
  // The TLS handshake, unless the client left while it was queued; false: the connection is
  // over (counted: refused, or abandoned by the client).
  asio::awaitable<bool> Handshake();
  void LeaveHandshakeQueue() noexcept {
    if (handshake_pending_ != nullptr) {
      handshake_pending_->fetch_sub(1, std::memory_order_relaxed);
      handshake_pending_ = nullptr;
    }
  }
  // Reads until the bytes seen so far are, or cannot be, HTTP/2's client preface (`*preface`
  // set when they are), within the first head's deadline. An error: the read failed (the peer
  // closed, a timeout, a stop), and the connection is over.
  asio::awaitable<beast::error_code> ReadHttp2Preface(bool* preface);
  // Sets the deadline of the next request head; on a kept-alive connection with nothing
  // buffered, first waits (up to the idle timeout) for its first bytes. An error: the
  // connection is over (closed, idle too long, a stop) before a head began.
  asio::awaitable<beast::error_code> AwaitHead();
  // What goes on once ServeOne's frame has ended: a watch (Exchange::detached) with its answer
  // and the access log's fields, without the parser, the request or the exchange.
  struct Rest;
  // false: close the connection. A watch is left in `*rest` for ServeHttp1 to start.
  asio::awaitable<bool> ServeOne(std::unique_ptr<Rest>* rest);
  // Once the watch has run: logs it; as ServeOne's result.
  bool EndRest(Rest& rest);
  // Requests one after another while `more`, then the connection's close; returns early when a
  // watch takes over (rest_), whose end (WatchEnded) goes on here.
  asio::awaitable<void> ServeHttp1(bool more);
  void WatchEnded();
  // Go's http.Server's answer to a head it cannot read: 431 (too large) or 400, plain text.
  asio::awaitable<void> WriteGoServerError(int code, std::string_view why);

  std::unique_ptr<AnyStream> client_;
  std::string remote_;
  std::string remote_ip_;
  Pipeline& pipeline_;
  SessionSet& sessions_;
  std::atomic<int64_t>& active_sessions_;
  const Logger& log_;
  bool gated_ = false;
  std::chrono::steady_clock::time_point accepted_{};
  std::chrono::milliseconds handshake_max_wait_{0};
  std::atomic<int64_t>* handshake_pending_ =
      nullptr;  // Decremented once, when Run leaves the queue.
  HeadTimeouts head_timeouts_;
  // The first request's head must be whole by then (set when the connection is ready to read).
  std::chrono::steady_clock::time_point first_head_deadline_{};
  bool first_head_ = true;
  beast::flat_buffer buffer_;
  State state_ = State::kStarting;
  std::shared_ptr<Http2Session> h2_;
  SharedHttp2Limits h2_limits_ = DefaultHttp2Limits();
  StopSignal stop_;
  std::unique_ptr<Rest> rest_;  // A watch under way (ServeHttp1).
  // What the TLS handshake presented, read at the first request (a watch's connection keeps
  // it); none on plain HTTP, where requests carry no certificate at all.
  PeerCertificate client_cert_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP_SESSION_H_
