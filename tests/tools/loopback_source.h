// Spreading test connections over loopback source addresses: one source address reaches one
// server port from about 28,000 ephemeral ports, so tens of thousands of connections to one
// listener need several (127.0.0.1, 127.0.0.2, ...; all of 127/8 is loopback on Linux).
#ifndef KUBE_FANOUT_TESTS_TOOLS_LOOPBACK_SOURCE_H_
#define KUBE_FANOUT_TESTS_TOOLS_LOOPBACK_SOURCE_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>

namespace kf::tools {

// Opens `socket` for IPv4 and binds it to 127.0.0.(1 + k), the port left to connect time (per
// destination, not per source address at bind time). Sets `ec` on failure.
inline void OpenFromLoopbackSource(boost::asio::ip::tcp::socket& socket, uint64_t k,
                                   boost::system::error_code& ec) {
  namespace ip = boost::asio::ip;
  if (!socket.is_open()) socket.open(ip::tcp::v4(), ec);
  if (ec) return;
  const int one = 1;
  (void)setsockopt(socket.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
  socket.bind(ip::tcp::endpoint(ip::address_v4(static_cast<uint32_t>(0x7f000001u + k)), 0), ec);
}

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_LOOPBACK_SOURCE_H_
