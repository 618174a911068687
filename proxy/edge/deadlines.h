// The I/O deadlines the transport sets and the stages above it share, each defined once
// (proxy/server/README.md: every I/O has a deadline). A stage's own deadlines stay beside it.
#ifndef KUBE_FANOUT_EDGE_DEADLINES_H_
#define KUBE_FANOUT_EDGE_DEADLINES_H_

#include <chrono>

namespace kf {

// One write to a client or to the upstream (an answer's bytes, a request, a tunnel's piece): a
// peer that takes nothing for this long is cut (on HTTP/2: its stream reset).
inline constexpr auto kWriteTimeout = std::chrono::seconds(60);

// Between two pieces of a body being read: a client's request body, an upstream's answer (Go's
// server has no such limit by default; this only frees connections that stalled for good).
inline constexpr auto kBodyIdleTimeout = std::chrono::seconds(120);

// A request's head must arrive whole within this: an HTTP/1.1 head, an HTTP/2 header block
// (Go's ReadHeaderTimeout in the apiserver's server; --http2-header-block-timeout's default).
inline constexpr auto kHeadTimeout = std::chrono::seconds(30);

// How long a kept-alive connection may wait for its next request (Go's IdleTimeout), HTTP/1.1
// and HTTP/2.
inline constexpr auto kKeepAliveIdleTimeout = std::chrono::seconds(90);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_DEADLINES_H_
