// Router: which route a request takes, decided once from its head and description. The
// routing table is given by the server: which paths kube-fanout answers itself and which
// resources it caches. Stateless; safe from any thread.
#ifndef KUBE_FANOUT_EDGE_ROUTER_H_
#define KUBE_FANOUT_EDGE_ROUTER_H_

#include <functional>
#include <string_view>

#include "proxy/edge/exchange.h"
#include "proxy/edge/request.h"

namespace kf {

struct RoutingTable {
  std::function<bool(std::string_view path)> is_local;  // /healthz, /metrics, ...
  std::function<bool(const RequestInfo&)> is_cached;    // Null: nothing is cached.
};

// Local: a GET or HEAD of one of kube-fanout's own paths. Tunnel: a protocol upgrade (exec,
// attach, port-forward). Cache: a bodiless GET of a cached resource (the cache handler may
// still decline it). Passthrough: everything else.
Route RouteOf(const Request& request, const RoutingTable& table);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_ROUTER_H_
