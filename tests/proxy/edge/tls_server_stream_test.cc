#include "proxy/edge/tls_server_stream.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "proxy/edge/batched_sends.h"
#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
using Client = asio::ssl::stream<asio::ip::tcp::socket>;

// A server context with a self-signed certificate, as kube-fanout's serving one is set up.
asio::ssl::context ServerContext(const std::string& name) {
  asio::ssl::context ctx(asio::ssl::context::tls_server);
  const auto [crt, key] = test::WriteSelfSigned(name);
  ctx.use_certificate_chain_file(crt);
  ctx.use_private_key_file(key, asio::ssl::context::pem);
  std::filesystem::remove(crt);
  std::filesystem::remove(key);
  return ctx;
}

// A TLS server stream and Asio's TLS client over a loopback pair, both handshaken.
struct TlsPair {
  explicit TlsPair(bool tickets = true)
      : server_ctx(ServerContext("kf-tls-server-stream-test")),
        client_ctx(asio::ssl::context::tls_client) {
    if (!tickets) SSL_CTX_set_num_tickets(server_ctx.native_handle(), 0);
    client_ctx.set_verify_mode(asio::ssl::verify_none);
    asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    client.next_layer().connect(acceptor.local_endpoint());
    server = std::make_unique<TlsServerStream>(beast::tcp_stream(acceptor.accept()),
                                               server_ctx.native_handle());
    beast::error_code server_ec = asio::error::would_block;
    beast::error_code client_ec = asio::error::would_block;
    test::Spawn(ioc, [](TlsServerStream& s, beast::error_code& out) -> asio::awaitable<void> {
      out = co_await s.Handshake();
    }(*server, server_ec));
    client.async_handshake(asio::ssl::stream_base::client,
                           [&client_ec](beast::error_code ec) { client_ec = ec; });
    REQUIRE(test::RunUntil(ioc, [&] {
      return server_ec != asio::error::would_block && client_ec != asio::error::would_block;
    }));
    REQUIRE_FALSE(server_ec);
    REQUIRE_FALSE(client_ec);
  }

  asio::io_context ioc;
  asio::ssl::context server_ctx;
  asio::ssl::context client_ctx;
  Client client{ioc, client_ctx};
  std::unique_ptr<TlsServerStream> server;
};

// Starts a server read into `into`; `out` gets its error when it ends.
void StartRead(TlsPair& p, std::string& into, beast::error_code& out) {
  test::Spawn(
      p.ioc,
      [](TlsServerStream& s, std::string& buf, beast::error_code& result) -> asio::awaitable<void> {
        auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_nothrow);
        result = ec;
      }(*p.server, into, out));
}

}  // namespace

TEST_CASE(
    "TlsServerStream carries bytes both ways with Asio's TLS client, a large gathered write "
    "whole and in order, and holds no buffer once quiet") {
  TlsPair p;
  // Client to server.
  const std::string hello = "GET /api/v1/pods?watch=1 HTTP/1.1\r\n\r\n";
  asio::write(p.client, asio::buffer(hello));
  std::string got(64, '\0');
  const size_t read =
      test::Run(p.ioc, [](TlsServerStream& s, std::string& into) -> asio::awaitable<size_t> {
        auto [ec, n] = co_await s.async_read_some(asio::buffer(into), use_nothrow);
        REQUIRE_FALSE(ec);
        co_return n;
      }(*p.server, got));
  CHECK(got.substr(0, read) == hello);

  // Server to client: many small pieces (gathered into records) and a large one, as a watch's
  // batch and a LIST's body go out.
  std::vector<std::string> pieces;
  for (int i = 0; i < 300; ++i)
    pieces.push_back("{\"type\":\"MODIFIED\",\"n\":" + std::to_string(i) + "}\n");
  pieces.push_back(std::string(3 * 1024 * 1024 + 17, 'x'));
  pieces.push_back("end");
  std::vector<asio::const_buffer> bufs;
  std::string expected;
  for (const auto& piece : pieces) {
    bufs.push_back(asio::buffer(piece));
    expected += piece;
  }
  std::string received(expected.size(), '\0');
  bool client_done = false;
  asio::async_read(p.client, asio::buffer(received),
                   [&](beast::error_code ec, size_t) { client_done = !ec; });
  const size_t written = test::Run(
      p.ioc, [](TlsServerStream& s, std::vector<asio::const_buffer> b) -> asio::awaitable<size_t> {
        auto [ec, n] = co_await asio::async_write(s, b, use_nothrow);
        REQUIRE_FALSE(ec);
        co_return n;
      }(*p.server, bufs));
  CHECK(written == expected.size());
  REQUIRE(test::RunUntil(p.ioc, [&] { return client_done; }));
  CHECK((received == expected));

  // Quiet, with a read waiting (as an idle watch's): only the small read's room is held.
  beast::error_code read_ec = asio::error::would_block;
  std::string tail(16, '\0');
  StartRead(p, tail, read_ec);
  p.ioc.run_for(std::chrono::milliseconds(50));
  CHECK(read_ec == asio::error::would_block);
  CHECK(p.server->held_bytes() <= 512);

  // The client's close_notify ends the server's read with eof, as Asio's stream reports it.
  bool shut = false;
  p.client.async_shutdown([&shut](beast::error_code) { shut = true; });
  REQUIRE(test::RunUntil(p.ioc, [&] { return read_ec != asio::error::would_block; }));
  CHECK(read_ec == asio::error::eof);
}

TEST_CASE(
    "TlsServerStream's read that waits on a quiet connection holds the small room, also after a "
    "read that filled it") {
  TlsPair p(false);
  // One TLS 1.3 record of exactly the small read's 512 bytes: 5 of header, the type and the
  // tag 17, so the socket read that takes it is full.
  const std::string request(512 - 22, 'r');
  asio::write(p.client, asio::buffer(request));
  std::string got(request.size(), '\0');
  const size_t read =
      test::Run(p.ioc, [](TlsServerStream& s, std::string& into) -> asio::awaitable<size_t> {
        auto [ec, n] = co_await asio::async_read(s, asio::buffer(into), use_nothrow);
        REQUIRE_FALSE(ec);
        co_return n;
      }(*p.server, got));
  REQUIRE(read == request.size());
  CHECK((got == request));

  // The client asks nothing more: the next read waits as a kept-alive connection's does.
  beast::error_code read_ec = asio::error::would_block;
  size_t first = 0;
  std::string received(100 * 1024, '\0');
  test::Spawn(p.ioc,
              [](TlsServerStream& s, std::string& into, beast::error_code& result,
                 size_t& n_out) -> asio::awaitable<void> {
                auto [ec, n] = co_await s.async_read_some(asio::buffer(into), use_nothrow);
                n_out = n;
                result = ec;
              }(*p.server, received, read_ec, first));
  p.ioc.run_for(std::chrono::milliseconds(50));
  CHECK(read_ec == asio::error::would_block);
  CHECK(p.server->held_bytes() <= 512);

  // A burst the client sends meanwhile is read whole and in order.
  const std::string burst(received.size(), 'b');
  asio::write(p.client, asio::buffer(burst));
  REQUIRE(test::RunUntil(p.ioc, [&] { return read_ec != asio::error::would_block; }));
  REQUIRE_FALSE(read_ec);
  REQUIRE(first > 0);
  test::Run(p.ioc, [](TlsServerStream& s, std::string& into, size_t from) -> asio::awaitable<void> {
    auto [ec, n] = co_await asio::async_read(
        s, asio::buffer(into.data() + from, into.size() - from), use_nothrow);
    REQUIRE_FALSE(ec);
  }(*p.server, received, first));
  CHECK((received == burst));
}

// Two small watch events, written as the first, small write of the direct-write cases.
const std::string kAddedLine = "{\"type\":\"ADDED\"}\n";
const std::string kModifiedLine = "{\"type\":\"MODIFIED\"}\n";

// What the client reads next, `n` bytes (waiting for them).
std::string ClientReads(TlsPair& p, size_t n) {
  std::string got(n, '\0');
  asio::read(p.client, asio::buffer(got));
  return got;
}

TEST_CASE(
    "TlsServerStream's TryWrite sends at once, holds as ciphertext what the socket does "
    "not take, and Flush sends the rest in order") {
  TlsPair p;
  const std::string& a = kAddedLine;
  const std::string& b = kModifiedLine;
  const std::array<asio::const_buffer, 2> small{asio::buffer(a), asio::buffer(b)};
  beast::error_code ec;
  REQUIRE(p.server->TryWrite(small, ec) == TlsServerStream::TryWriteResult::kWritten);
  CHECK_FALSE(ec);
  CHECK(p.server->held_bytes() == 0);
  CHECK(ClientReads(p, a.size() + b.size()) == a + b);

  // 8 MiB the client does not read yet: the socket takes part, the rest is held.
  const std::string big(8 * 1024 * 1024, 'y');
  const std::array<asio::const_buffer, 1> large{asio::buffer(big)};
  REQUIRE(p.server->TryWrite(large, ec) == TlsServerStream::TryWriteResult::kHeld);
  CHECK_FALSE(ec);
  CHECK(p.server->held_bytes() > 0);
  std::string received(big.size() + a.size(), '\0');
  bool client_done = false;
  asio::async_read(p.client, asio::buffer(received),
                   [&](beast::error_code e, size_t) { client_done = !e; });
  const beast::error_code flushed = test::Run(p.ioc, p.server->Flush());
  CHECK_FALSE(flushed);
  CHECK(p.server->held_bytes() == 0);
  const std::array<asio::const_buffer, 1> after{asio::buffer(a)};
  REQUIRE(p.server->TryWrite(after, ec) == TlsServerStream::TryWriteResult::kWritten);
  REQUIRE(test::RunUntil(p.ioc, [&] { return client_done; }));
  CHECK((received == big + a));
}

struct SendResult final : BatchedSends::Done {
  virtual ~SendResult() = default;
  void Sent(int64_t r, std::span<const iovec> /*sent*/) override {
    ++calls;
    result = r;
  }
  int calls = 0;
  int64_t result = 0;
};

// Encrypts `pieces` and sends the records as one send of a burst: the send's result.
int64_t EncryptAndSendBatched(TlsServerStream& s, std::span<const asio::const_buffer> pieces) {
  beast::error_code ec;
  REQUIRE(s.EncryptAll(pieces, ec));
  REQUIRE_FALSE(ec);
  REQUIRE_FALSE(s.ciphertext().empty());
  const std::array<asio::const_buffer, 1> records{asio::buffer(s.ciphertext())};
  SendResult done;
  BatchedSends::StartBurst();
  REQUIRE(BatchedSends::Queue(s.tcp().socket().native_handle(), records, &done));
  CHECK(done.calls == 0);
  BatchedSends::EndBurst();
  REQUIRE(done.calls == 1);
  return done.result;
}

TEST_CASE(
    "TlsServerStream in two steps: its records go as a burst's batched send, Wrote holds what "
    "the socket did not take") {
  const absl::Status uring = BatchedSends::Probe();
  INFO("io_uring on this machine: " << uring.ToString());
  REQUIRE(uring.ok());
  BatchedSends::Enable(true);
  TlsPair p;
  const std::string& a = kAddedLine;
  const std::string& b = kModifiedLine;
  const std::array<asio::const_buffer, 2> small{asio::buffer(a), asio::buffer(b)};
  const size_t records = a.size() + b.size() + 22;  // One TLS 1.3 record: header, type, tag.
  CHECK(EncryptAndSendBatched(*p.server, small) == static_cast<int64_t>(records));
  CHECK(p.server->Wrote(records) == TlsServerStream::TryWriteResult::kWritten);
  CHECK(p.server->held_bytes() == 0);
  CHECK(ClientReads(p, a.size() + b.size()) == a + b);

  // 8 MiB the client does not read yet: the socket takes part, the rest is held.
  const std::string big(8 * 1024 * 1024, 'y');
  const std::array<asio::const_buffer, 1> large{asio::buffer(big)};
  const int64_t sent = EncryptAndSendBatched(*p.server, large);
  REQUIRE(sent > 0);
  CHECK(static_cast<size_t>(sent) < p.server->ciphertext().size());
  REQUIRE(p.server->Wrote(static_cast<size_t>(sent)) == TlsServerStream::TryWriteResult::kHeld);
  std::string received(big.size(), '\0');
  bool client_done = false;
  asio::async_read(p.client, asio::buffer(received),
                   [&](beast::error_code e, size_t) { client_done = !e; });
  CHECK_FALSE(test::Run(p.ioc, p.server->Flush()));
  REQUIRE(test::RunUntil(p.ioc, [&] { return client_done; }));
  CHECK(p.server->held_bytes() == 0);
  const bool same = received == big;  // (Not printed: 8 MiB.)
  CHECK(same);
}

TEST_CASE("TlsServerStream reports a peer gone without close_notify as stream_truncated") {
  // No session tickets: the client closes with nothing unread, so its end is a FIN, not a reset.
  TlsPair p(/*tickets=*/false);
  beast::error_code read_ec = asio::error::would_block;
  std::string into(16, '\0');
  StartRead(p, into, read_ec);
  p.ioc.run_for(std::chrono::milliseconds(20));
  p.client.next_layer().close();
  REQUIRE(test::RunUntil(p.ioc, [&] { return read_ec != asio::error::would_block; }));
  CHECK(read_ec == asio::ssl::error::stream_truncated);
}

TEST_CASE("TlsServerStream fails a handshake that is not TLS, without throwing") {
  asio::io_context ioc;
  asio::ssl::context ctx = ServerContext("kf-tls-server-stream-plain");
  asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket client(ioc);
  client.connect(acceptor.local_endpoint());
  TlsServerStream server(beast::tcp_stream(acceptor.accept()), ctx.native_handle());
  asio::write(client, asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
  const beast::error_code ec = test::Run(ioc, server.Handshake());
  CHECK(ec);
  CHECK(ec != asio::error::would_block);
}

}  // namespace kf
