#include "proxy/edge/router.h"

#include "proxy/edge/hop_by_hop.h"

namespace kf {

Route RouteOf(const Request& request, const RoutingTable& table) {
  namespace http = beast::http;
  const RequestInfo& info = request.info;
  const bool read = request.method == http::verb::get || request.method == http::verb::head;
  if (!info.is_resource_request && read && table.is_local && table.is_local(info.path)) {
    return Route::kLocal;
  }
  if (IsUpgradeRequest(request.headers)) return Route::kTunnel;
  if (request.method == http::verb::get && request.body.done() && table.is_cached &&
      table.is_cached(info)) {
    return Route::kCache;
  }
  return Route::kPassthrough;
}

}  // namespace kf
