// Relay: the passthrough handler. Forwards one request to the upstream with the client's own
// credentials (upstream_request.h) and streams the answer back as it arrives, body in bounded
// pieces (never held whole), so a watch's events reach the client one by one; hop-by-hop
// fields dropped (RFC 9110 §7.6.1); protocol upgrades tunnelled (tunnel.h) once the upstream
// answers 101. An upstream that cannot be reached is a 503 Status.
//
// Credentials (proxy/upstream/vouched.h): a request goes with the client's own (its Authorization
// header), except one whose client certificate or trusted front proxy vouches for its user: that
// user goes as request-header fields over a front-proxy connection
// (proxy/upstream/request_header.h). A certificate the apiserver would not accept, without a bearer
// token to fall back on, or an identity that could not be carried upstream unchanged, is refused
// here with the apiserver's 401. A head holding bytes HTTP forbids is never written
// (upstream_request.h): 400 when they are the client's, 500 when they would be kube-fanout's.
//
// One per worker thread (the pools are that thread's).
#ifndef KUBE_FANOUT_PASSTHROUGH_RELAY_H_
#define KUBE_FANOUT_PASSTHROUGH_RELAY_H_

#include "proxy/edge/filter.h"
#include "proxy/upstream/request_header.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

// Where a worker's passthrough goes: pools without any identity of kube-fanout's, and pools
// presenting its front-proxy certificate (null when none is configured).
struct RelayPools {
  UpstreamPool* pool = nullptr;
  UpstreamPool* events_pool = nullptr;  // Events (a separate upstream may carry them).
  UpstreamPool* front_pool = nullptr;
  UpstreamPool* events_front_pool = nullptr;
};

class Relay : public Handler {
 public:
  Relay(RelayPools pools, const RequestHeaderNames& names) : pools_(pools), names_(names) {}

  asio::awaitable<bool> Serve(Exchange& x) override;

 private:
  // Answers a request that got no answer from the upstream (why: x.error, or `refused`).
  static asio::awaitable<bool> Unanswered(Exchange& x, const absl::Status& refused);

  RelayPools pools_;
  const RequestHeaderNames& names_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_RELAY_H_
