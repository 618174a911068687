// UpstreamPool: connections from one io thread to the upstream apiserver endpoints, for
// passthrough. Dials (TCP, then TLS verified against the configured CA, without any client
// certificate: passthrough must never present kube-fanout's identity), keeps a few idle
// keep-alive connections for reuse, and fails over between endpoints in order, remembering the
// last one that answered.
//
// One per io_context; touched only from that context's thread (no locks).
#ifndef KUBE_FANOUT_UPSTREAM_UPSTREAM_POOL_H_
#define KUBE_FANOUT_UPSTREAM_UPSTREAM_POOL_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/any_stream.h"
#include "upstream/upstream_config.h"

namespace kf {

class UpstreamPool {
 public:
  struct Lease {
    std::unique_ptr<AnyStream> stream;
    size_t endpoint = 0;
    bool reused = false;  // Came from the idle list: the peer may have closed it meanwhile.
  };

  // `tls` must outlive the pool and must hold no client certificate.
  UpstreamPool(asio::io_context& ioc, const UpstreamConfig& config, asio::ssl::context& tls,
               std::chrono::milliseconds dial_timeout);

  // An idle connection when `allow_reuse` and one is fresh, else a new one; tries every
  // endpoint once, starting with the last good one. Unavailable when none answers.
  asio::awaitable<absl::StatusOr<Lease>> Acquire(bool allow_reuse);

  // Returns a connection whose last exchange ended cleanly (keep-alive) to the idle list.
  void Release(Lease lease);

  const UpstreamEndpoint& endpoint(size_t i) const { return config_.endpoints[i]; }

 private:
  struct Idle {
    std::unique_ptr<AnyStream> stream;
    std::chrono::steady_clock::time_point since;
  };
  asio::awaitable<absl::StatusOr<std::unique_ptr<AnyStream>>> Dial(const UpstreamEndpoint& ep);

  asio::io_context& ioc_;
  const UpstreamConfig& config_;
  asio::ssl::context& tls_;
  std::chrono::milliseconds dial_timeout_;
  std::vector<std::deque<Idle>> idle_;  // Per endpoint, bounded by kMaxIdlePerEndpoint.
  size_t preferred_ = 0;
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
