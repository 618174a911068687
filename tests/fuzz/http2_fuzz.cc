// libFuzzer target: the bytes of an HTTP/2 connection (edge/http2_session.h, nghttp2's server
// session and kube-fanout's callbacks). The input is what the client sent after its preface;
// then the client half-closes. Every stream's request body is read (bounded) and answered "ok",
// so headers, bodies, resets, window updates, settings and GOAWAY all reach the session's code.
// The session must not crash, leak or overrun; it runs for at most a second per input.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/any_stream.h"
#include "edge/http2_session.h"
#include "edge/pipeline.h"
#include "edge/request.h"
#include "edge/response.h"
#include "tests/fuzz/connection_fixture.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

class Ok : public kf::Handler {
 public:
  asio::awaitable<bool> Serve(kf::Exchange& x) override {
    auto body = co_await kf::ReadWholeBody(x.request.body, 1 << 20);
    const std::string text = body ? "ok" : "too big";  // Named: GCC 12 and temporaries.
    co_await kf::WriteWhole(*x.response, 200, "text/plain", text);
    co_return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* fixture = new kf::fuzz::OneHandlerPipeline<Ok>();
  asio::io_context ioc;
  kf::fuzz::LoopbackPair pair(ioc);
  kf::AnyStream stream(pair.Accept());
  pair.client.shutdown(asio::ip::tcp::socket::shutdown_send);
  auto session =
      std::make_shared<kf::Http2Session>(stream, "fuzz", "127.0.0.1", *fixture->pipeline,
                                         fixture->stats.transport, kf::ClientCertificate{});
  std::string received(kf::kHttp2Preface);
  received.append(reinterpret_cast<const char*>(data), size);
  asio::co_spawn(
      ioc, [session, received]() mutable { return session->Run(std::move(received)); },
      asio::detached);
  session.reset();
  ioc.run_for(std::chrono::seconds(1));
  return 0;
}
