// UpstreamPool: connections from one io thread to the upstream apiserver endpoints, for
// passthrough. Dials (TCP, then TLS verified against the configured CA, without any client
// certificate: passthrough must never present kube-fanout's identity), keeps a few idle
// keep-alive connections for reuse, and fails over between endpoints in order, remembering the
// last one that answered. With `http2`, requests without a body or an upgrade share HTTP/2
// connections instead (AcquireHttp2): as many as the server's stream limit on each, another
// dialed when every one is full, as client-go's transport does.
//
// One per io_context; touched only from that context's thread (no locks).
#ifndef KUBE_FANOUT_UPSTREAM_UPSTREAM_POOL_H_
#define KUBE_FANOUT_UPSTREAM_UPSTREAM_POOL_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proxy/edge/any_stream.h"
#include "proxy/upstream/http2_upstream.h"
#include "proxy/upstream/upstream_config.h"

namespace kf {

// Pooled connections found closed by their upstream, counted for /metrics (shared by every
// worker's pools; any thread).
struct UpstreamPoolStats {
  // An idle connection taken for a request was found closed (or reset, or sent bytes nobody
  // asked for) and a new one was used instead: the request never met the dead connection.
  std::atomic<uint64_t> stale_idle{0};
  // A reused connection failed under a request (its close raced the check): a request without
  // a body was sent again on a new connection; a passed-through one with a body failed (503).
  std::atomic<uint64_t> stale_in_use{0};
  Http2UpstreamStats http2;
};

class UpstreamPool {
 public:
  struct Lease {
    std::unique_ptr<AnyStream> stream;
    size_t endpoint = 0;
    bool reused = false;  // Came from the idle list: the peer may have closed it meanwhile.
  };

  // `tls` must outlive the pool and must hold no client certificate; `stats` (may be null)
  // too.
  UpstreamPool(asio::io_context& ioc, const UpstreamConfig& config, asio::ssl::context& tls,
               std::chrono::milliseconds dial_timeout, UpstreamPoolStats* stats = nullptr,
               bool http2 = false);

  // An idle connection when `allow_reuse` and one is fresh and still open, else a new one;
  // tries every endpoint once, starting with the last good one. Unavailable when none answers.
  // An idle connection the upstream closed meanwhile (a FIN, a reset, or bytes it sent while
  // nothing was asked, such as a TLS close_notify) is dropped before any request is written
  // to it, as Go's transport does. A dial ends by `deadline` too, when that comes before the
  // dial timeout (a call bounded as a whole: a review); an endpoint whose dial failed is tried
  // after the others by the next Acquire.
  asio::awaitable<absl::StatusOr<Lease>> Acquire(bool allow_reuse,
                                                 std::chrono::steady_clock::time_point deadline =
                                                     std::chrono::steady_clock::time_point::max());

  // Returns a connection whose last exchange ended cleanly (keep-alive) to the idle list.
  void Release(Lease lease);

  // A reused lease failed under its request (counted in stats.stale_in_use).
  void FailedInUse() const {
    if (stats_ != nullptr) stats_->stale_in_use.fetch_add(1, std::memory_order_relaxed);
  }

  // An HTTP/2 connection with room for one more stream: an open one, else one dialed (ALPN
  // "h2", then the server's SETTINGS; one dial at a time, the others wait for it). Null, not an
  // error, when this pool does not speak HTTP/2 to the endpoint (not enabled, plain TCP, or its
  // server chose HTTP/1.1): the caller uses Acquire. The caller submits its stream before it
  // next suspends (else the room it found may be another's).
  asio::awaitable<absl::StatusOr<std::shared_ptr<Http2Upstream>>> AcquireHttp2();
  bool http2() const { return http2_; }
  // Closes every HTTP/2 connection (their open streams fail): at the end of a graceful stop.
  void CloseHttp2();

  const UpstreamEndpoint& endpoint(size_t i) const { return config_.endpoints[i]; }

 private:
  struct Idle {
    std::unique_ptr<AnyStream> stream;
    std::chrono::steady_clock::time_point since;
  };
  asio::awaitable<absl::StatusOr<std::unique_ptr<AnyStream>>> Dial(
      const UpstreamEndpoint& ep, bool offer_http2 = false,
      std::chrono::steady_clock::time_point deadline =
          std::chrono::steady_clock::time_point::max());
  // A new HTTP/2 connection, failing over between endpoints; null when the server chose
  // HTTP/1.1 (that connection goes to the idle list).
  asio::awaitable<absl::StatusOr<std::shared_ptr<Http2Upstream>>> DialHttp2();
  // Drops ended connections, and closes those idle past kMaxIdleAge.
  void PruneHttp2();

  asio::io_context& ioc_;
  const UpstreamConfig& config_;
  asio::ssl::context& tls_;
  std::chrono::milliseconds dial_timeout_;
  UpstreamPoolStats* stats_;
  std::vector<std::deque<Idle>> idle_;  // Per endpoint, bounded by kMaxIdlePerEndpoint.
  size_t preferred_ = 0;
  bool http2_;
  std::vector<bool> http1_only_;  // Per endpoint: its server chose HTTP/1.1 by ALPN.
  std::vector<std::shared_ptr<Http2Upstream>> h2_;
  // A dial under way: the others wait on this timer; its outcome, by generation.
  bool h2_dialing_ = false;
  std::unique_ptr<asio::steady_timer> h2_dial_done_;
  uint64_t h2_dials_ = 0;
  absl::Status h2_last_dial_;
};

// The TLS client context for passthrough: trust from `config` (CA or system roots, or none when
// insecure), TLS 1.2+, and deliberately no client certificate.
absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakePassthroughTlsContext(
    const UpstreamConfig& config);

// The TLS client context for kube-fanout's own requests: the same trust, plus its client
// certificate when the configuration has one.
absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeOwnTlsContext(const UpstreamConfig& config);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_UPSTREAM_POOL_H_
