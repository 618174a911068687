// Relay: the passthrough handler. Forwards one request to the upstream with the client's own
// credentials (upstream_request.h) and streams the answer back as it arrives, body in bounded
// pieces (never held whole), so a watch's events reach the client one by one; hop-by-hop
// fields dropped (RFC 9110 §7.6.1); protocol upgrades tunnelled (tunnel.h) once the upstream
// answers 101. An upstream that cannot be reached is a 503 Status.
//
// One per worker thread (the pools are that thread's).
#ifndef KUBE_FANOUT_PASSTHROUGH_RELAY_H_
#define KUBE_FANOUT_PASSTHROUGH_RELAY_H_

#include "edge/filter.h"
#include "upstream/upstream_pool.h"

namespace kf {

class Relay : public Handler {
 public:
  // `events_pool`: for Events (a separate upstream may carry them); may be `pool`.
  Relay(UpstreamPool& pool, UpstreamPool& events_pool) : pool_(pool), events_pool_(events_pool) {}

  asio::awaitable<bool> Serve(Exchange& x) override;

 private:
  UpstreamPool& pool_;
  UpstreamPool& events_pool_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_RELAY_H_
