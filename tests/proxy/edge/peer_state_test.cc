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

// TLS records as a TLS 1.3 client sends them after the server's Finished: `type` and a body of
// `length` bytes each.
std::string Records(std::initializer_list<std::pair<int, size_t>> records) {
  std::string out;
  for (const auto& [type, length] : records) {
    out += static_cast<char>(type);
    out += "\x03\x03";
    out += static_cast<char>(length >> 8);
    out += static_cast<char>(length & 0xff);
    out += std::string(length, 'c');
  }
  return out;
}

TEST_CASE("A TLS 1.3 last flight then close_notify, as Go's client sends one it does not need",
          "[edge][peer_state]") {
  // Go 1.2x with an ECDSA node certificate: ChangeCipherSpec, Certificate, CertificateVerify,
  // Finished, close_notify (the sizes kube-fanout read from Go's handshake client).
  const std::string flight = Records({{20, 1}, {23, 656}, {23, 97}, {23, 53}});
  CHECK(EndsWithFinished(flight));
  CHECK_FALSE(ClosedRightAfterFinished(flight));
  CHECK(ClosedRightAfterFinished(flight + Records({{23, 19}})));
  // SHA-384's Finished (TLS_AES_256_GCM_SHA384).
  CHECK(ClosedRightAfterFinished(Records({{23, 700}, {23, 69}, {23, 19}})));
  // A resumed handshake's flight is its Finished alone.
  CHECK(ClosedRightAfterFinished(Records({{23, 53}, {23, 19}})));
}

TEST_CASE("Anything after the client's Finished, or a flight that is not whole, is no close",
          "[edge][peer_state]") {
  // A request (or HTTP/2's preface) between the Finished and the alert.
  CHECK_FALSE(ClosedRightAfterFinished(Records({{23, 656}, {23, 53}, {23, 60}, {23, 19}})));
  CHECK_FALSE(EndsWithFinished(Records({{23, 656}, {23, 53}, {23, 60}})));
  // A Finished packed with the other messages into one record.
  CHECK_FALSE(ClosedRightAfterFinished(Records({{23, 806}, {23, 19}})));
  CHECK_FALSE(EndsWithFinished(Records({{23, 806}})));
  // Cut short: inside a header, inside a body.
  const std::string whole = Records({{23, 656}, {23, 53}, {23, 19}});
  CHECK_FALSE(ClosedRightAfterFinished(whole.substr(0, whole.size() - 1)));
  CHECK_FALSE(ClosedRightAfterFinished(whole.substr(0, whole.size() - 21)));
  CHECK_FALSE(EndsWithFinished(whole.substr(0, 3)));
  // An alert sent in the clear (type 21), or nothing at all.
  CHECK_FALSE(ClosedRightAfterFinished(Records({{23, 53}, {21, 19}})));
  CHECK_FALSE(ClosedRightAfterFinished(""));
  CHECK_FALSE(EndsWithFinished(""));
}

}  // namespace
}  // namespace kf
