#include "proxy/edge/peer_state.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <string>

namespace kf {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

struct Connected {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  tcp::socket client{ioc};
  tcp::socket server{ioc};
  Connected() {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
  // Lets the kernel deliver what the client did: loopback is synchronous, but give it a bounded
  // chance all the same.
  bool WaitClosed() {
    for (int i = 0; i < 1000 && !PeerClosed(server.native_handle()); ++i) {
      ioc.run_for(std::chrono::milliseconds(1));
    }
    return PeerClosed(server.native_handle());
  }
};

TEST_CASE("PeerClosed is false while the client keeps its connection, even with unread bytes",
          "[edge][peer_state]") {
  Connected c;
  CHECK_FALSE(PeerClosed(c.server.native_handle()));
  asio::write(c.client, asio::buffer(std::string("\x16\x03\x01 a ClientHello")));
  CHECK_FALSE(PeerClosed(c.server.native_handle()));
}

TEST_CASE("PeerClosed is true once the client closed, its ClientHello still unread",
          "[edge][peer_state]") {
  Connected c;
  asio::write(c.client, asio::buffer(std::string("\x16\x03\x01 a ClientHello")));
  c.client.close();
  CHECK(c.WaitClosed());
}

TEST_CASE("PeerClosed is true after the client reset the connection", "[edge][peer_state]") {
  Connected c;
  c.client.set_option(asio::socket_base::linger(true, 0));  // close sends RST
  c.client.close();
  CHECK(c.WaitClosed());
}

TEST_CASE("PeerClosed is false for a descriptor that is no socket", "[edge][peer_state]") {
  CHECK_FALSE(PeerClosed(-1));
}

}  // namespace
}  // namespace kf
