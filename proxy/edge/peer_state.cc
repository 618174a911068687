#include "proxy/edge/peer_state.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace kf {

bool PeerClosed(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // CLOSE_WAIT: the peer's FIN came and we have not closed; CLOSE: reset (or never connected).
  return info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_CLOSE;
}

}  // namespace kf
