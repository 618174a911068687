// Tunnel: after a 101 (kubectl exec, attach, port-forward), bytes both ways between the client
// and the upstream until either side ends, in bounded pieces. First the bytes each side sent
// past its head.
#ifndef KUBE_FANOUT_PASSTHROUGH_TUNNEL_H_
#define KUBE_FANOUT_PASSTHROUGH_TUNNEL_H_

#include <boost/beast/core/flat_buffer.hpp>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/response.h"

namespace kf {

asio::awaitable<void> Tunnel(Upgraded client, AnyStream& up, beast::flat_buffer& up_pending);

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_TUNNEL_H_
