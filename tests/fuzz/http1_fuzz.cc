// libFuzzer target: the bytes of an HTTP/1.1 connection as kube-fanout's server reads them
// (proxy/edge/http_session.h). The input is everything the client sends on one connection, then it
// half-closes: one or more pipelined requests, Content-Length or chunked bodies, or garbage.
// The session's own code reads it: RequestParser (proxy/edge/request_parser.h, Beast's parser with
// kube-fanout's header and field limits), Http1Body (the body through the same parser) and the
// session's loop over pipelined requests and its 400/431 answers; every request's body is read
// in small pieces (so chunk boundaries and need_buffer fall anywhere) and answered.
// Invariants: no crash, leak, overrun or exception; a Content-Length body that ended without
// an error has exactly that many bytes. Each input runs at most a second.
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/http_session.h"
#include "proxy/edge/pipeline.h"
#include "proxy/edge/request.h"
#include "proxy/edge/response.h"
#include "proxy/edge/session_set.h"
#include "tests/fuzz/connection_fixture.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Reads each body in pieces of 7 bytes, at most 1 MiB, and answers with its length.
class ReadBody : public kf::Handler {
 public:
  asio::awaitable<bool> Serve(kf::Exchange& x) override {
    std::array<char, 7> piece;
    size_t total = 0;
    beast::error_code error;
    while (!x.request.body.done() && total <= (1u << 20)) {
      auto [ec, n] = co_await x.request.body.ReadSome(piece);
      if (n > piece.size()) std::abort();  // More than the buffer it was given.
      total += n;
      if (ec) {
        error = ec;
        break;
      }
    }
    const std::string_view length = x.request.headers[http::field::content_length];
    uint64_t declared = 0;
    const auto [end, parsed] =
        std::from_chars(length.data(), length.data() + length.size(), declared);
    if (!error && x.request.body.done() && !x.request.body.chunked() && !length.empty() &&
        parsed == std::errc() && end == length.data() + length.size() && declared != total) {
      std::abort();  // A Content-Length body that ended cleanly with another size.
    }
    const std::string text = std::to_string(total);  // Named: GCC 12 and temporaries.
    co_await kf::WriteWhole(*x.response, 200, "text/plain", text);
    co_return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* fixture = new kf::fuzz::OneHandlerPipeline<ReadBody>();
  static kf::SessionSet sessions;
  static std::atomic<int64_t> active{0};
  asio::io_context ioc;
  kf::fuzz::LoopbackPair pair(ioc);
  asio::ip::tcp::socket& client = pair.client;
  auto stream = std::make_unique<kf::AnyStream>(pair.Accept());
  auto session = std::make_shared<kf::HttpSession>(
      std::move(stream), "127.0.0.1:5555", *fixture->pipeline, sessions, active, fixture->log);
  session->Start(ioc.get_executor());
  session.reset();
  // Written while the session runs (an input larger than the socket's buffers does not block),
  // then the client half-closes; its answers are read and dropped.
  const std::string input(reinterpret_cast<const char*>(data), size);
  asio::async_write(client, asio::buffer(input), [&client](beast::error_code, size_t) {
    beast::error_code ignored;
    client.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  });
  std::array<char, 4096> answers;
  std::function<void(beast::error_code, size_t)> drain = [&](beast::error_code ec, size_t) {
    if (!ec) client.async_read_some(asio::buffer(answers), drain);
  };
  client.async_read_some(asio::buffer(answers), drain);
  ioc.run_for(std::chrono::seconds(1));
  return 0;
}
