// A TLS 1.3 client whose last flight is followed by close_notify and nothing else leaves its
// handshake unfinished at TlsServerStream (its certificate and signature unchecked); one that
// sends anything after its Finished, or nothing for a while, gets the whole handshake. The
// client here is OpenSSL over memory BIOs, so the test decides when its bytes reach the socket.
#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "proxy/edge/tls_server_stream.h"
#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

// Every client certificate accepted, as kube-fanout's handshake checks no chain
// (proxy/edge/client_cert.cc verifies it per role at the first request).
int AcceptAny(X509_STORE_CTX* /*store*/, void* /*arg*/) { return 1; }

struct LastFlight {
  LastFlight()
      : server_ctx(asio::ssl::context::tls_server), client_ctx(SSL_CTX_new(TLS_client_method())) {
    const auto [crt, key] = test::WriteSelfSigned("kf-tls-last-flight-test");
    server_ctx.use_certificate_chain_file(crt);
    server_ctx.use_private_key_file(key, asio::ssl::context::pem);
    SSL_CTX_set_verify(server_ctx.native_handle(), SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_cert_verify_callback(server_ctx.native_handle(), &AcceptAny, nullptr);
    // The client presents the same certificate (a node's, for the server's purpose here).
    REQUIRE(SSL_CTX_use_certificate_chain_file(client_ctx, crt.c_str()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(client_ctx, key.c_str(), SSL_FILETYPE_PEM) == 1);
    std::filesystem::remove(crt);
    std::filesystem::remove(key);
    client = SSL_new(client_ctx);
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    SSL_set_bio(client, in, out);
    SSL_set_connect_state(client);
    asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    socket.connect(acceptor.local_endpoint());
    server = std::make_unique<TlsServerStream>(beast::tcp_stream(acceptor.accept()),
                                               server_ctx.native_handle());
    handshake = test::Spawn(ioc, [](LastFlight& f) -> asio::awaitable<void> {
      f.server_ec = co_await f.server->Handshake();
    }(*this));
  }
  ~LastFlight() {
    SSL_free(client);
    SSL_CTX_free(client_ctx);
  }

  // The bytes the client has made and not yet sent.
  std::string Made() {
    std::string bytes(static_cast<size_t>(BIO_ctrl_pending(SSL_get_wbio(client))), '\0');
    if (!bytes.empty())
      BIO_read(SSL_get_wbio(client), bytes.data(), static_cast<int>(bytes.size()));
    return bytes;
  }

  // Runs the client's side up to its Finished: its last flight is made, not sent. The server
  // has answered the ClientHello and waits for that flight.
  void ClientUpToFinished() {
    for (int round = 0; round < 10; ++round) {
      if (SSL_connect(client) == 1) return;
      REQUIRE(SSL_get_error(client, -1) == SSL_ERROR_WANT_READ);
      asio::write(socket, asio::buffer(Made()));
      REQUIRE(test::RunUntil(ioc, [&] { return socket.available() > 0; }));
      ioc.run_for(std::chrono::milliseconds(5));  // All of the server's flight.
      std::string got(socket.available(), '\0');
      asio::read(socket, asio::buffer(got));
      BIO_write(SSL_get_rbio(client), got.data(), static_cast<int>(got.size()));
    }
    FAIL("the client's handshake did not finish");
  }

  asio::io_context ioc;
  asio::ssl::context server_ctx;
  SSL_CTX* client_ctx;
  SSL* client = nullptr;
  asio::ip::tcp::socket socket{ioc};
  std::unique_ptr<TlsServerStream> server;
  beast::error_code server_ec = asio::error::would_block;
  test::Spawned handshake;
};

}  // namespace

TEST_CASE(
    "A TLS 1.3 client that sends close_notify right after its Finished leaves its handshake "
    "unfinished, its last flight not taken") {
  LastFlight f;
  f.ClientUpToFinished();
  REQUIRE(SSL_version(f.client) == TLS1_3_VERSION);
  REQUIRE(SSL_shutdown(f.client) == 0);  // close_notify made.
  asio::write(f.socket, asio::buffer(f.Made()));
  f.socket.close();
  REQUIRE(test::RunUntil(f.ioc, [&] { return f.handshake.finished(); }));
  CHECK(f.server_ec == asio::error::eof);
  CHECK(f.server->abandoned());
  // OpenSSL never read the flight: the client's certificate was not taken.
  CHECK(SSL_get0_peer_certificate(f.server->native_handle()) == nullptr);
}

TEST_CASE(
    "A TLS 1.3 client that sends close_notify after its Finished but keeps the socket open gets "
    "the whole handshake") {
  LastFlight f;
  f.ClientUpToFinished();
  REQUIRE(SSL_shutdown(f.client) == 0);
  asio::write(f.socket, asio::buffer(f.Made()));  // No FIN: the socket stays open.
  REQUIRE(test::RunUntil(f.ioc, [&] { return f.handshake.finished(); }));
  CHECK_FALSE(f.server_ec);
  CHECK_FALSE(f.server->abandoned());
  CHECK(SSL_get0_peer_certificate(f.server->native_handle()) != nullptr);
  // Its close_notify is read as the end of the stream, as from any client.
  std::string got(16, '\0');
  auto [ec, n] = test::Run(
      f.ioc, f.server->async_read_some(asio::buffer(got), asio::as_tuple(asio::use_awaitable)));
  CHECK(ec == asio::error::eof);
}

TEST_CASE(
    "A TLS 1.3 client that asks something after its Finished gets the whole handshake, however "
    "soon it then closes") {
  LastFlight f;
  f.ClientUpToFinished();
  const std::string request = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(SSL_write(f.client, request.data(), static_cast<int>(request.size())) ==
          static_cast<int>(request.size()));
  REQUIRE(SSL_shutdown(f.client) == 0);
  asio::write(f.socket, asio::buffer(f.Made()));
  f.socket.shutdown(asio::ip::tcp::socket::shutdown_send);
  REQUIRE(test::RunUntil(f.ioc, [&] { return f.handshake.finished(); }));
  CHECK_FALSE(f.server_ec);
  CHECK_FALSE(f.server->abandoned());
  CHECK(SSL_get0_peer_certificate(f.server->native_handle()) != nullptr);
  std::string got(request.size(), '\0');
  auto [ec, n] = test::Run(
      f.ioc, f.server->async_read_some(asio::buffer(got), asio::as_tuple(asio::use_awaitable)));
  CHECK_FALSE(ec);
  CHECK(got.substr(0, n) == request);
}

TEST_CASE(
    "A TLS 1.3 client that sends nothing after its Finished gets the whole handshake once the "
    "short wait has passed, the connection kept") {
  LastFlight f;
  f.ClientUpToFinished();
  const auto sent = std::chrono::steady_clock::now();
  asio::write(f.socket, asio::buffer(f.Made()));
  REQUIRE(test::RunUntil(f.ioc, [&] { return f.handshake.finished(); }));
  const auto took = std::chrono::steady_clock::now() - sent;
  CHECK_FALSE(f.server_ec);
  CHECK_FALSE(f.server->abandoned());
  CHECK(SSL_get0_peer_certificate(f.server->native_handle()) != nullptr);
  // It waited for the client's next bytes (none came), and not much longer.
  CHECK(took >= TlsServerStream::kLastFlightWait);
}

}  // namespace kf
