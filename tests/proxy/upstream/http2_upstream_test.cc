#include "proxy/upstream/http2_upstream.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>

#include "proxy/edge/http2_session.h"
#include "proxy/edge/http_session.h"
#include "proxy/edge/pipeline.h"
#include "proxy/edge/session_set.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

using Clock = std::chrono::steady_clock;

// The upstream's side: /small a whole "ok"; /big 1 MiB streamed; /hold waits until its
// client resets the stream (counted) or it is told.
class Upstream : public Handler {
 public:
  asio::awaitable<bool> Serve(Exchange& x) override {
    const std::string_view path = x.request.target;
    if (path == "/small") {
      seen_authorization = std::string(x.request.headers["authorization"]);
      co_await WriteWhole(*x.response, 200, "application/json", "ok");
    } else if (path == "/big") {
      ResponseHead head;
      head.framing = ResponseHead::Framing::kStreamed;
      if (co_await x.response->WriteHead(std::move(head))) co_return true;
      const std::string piece(16 * 1024, 'x');
      const std::array<asio::const_buffer, 1> b{asio::buffer(piece)};
      for (int i = 0; i < 64; ++i) {
        if (co_await x.response->WriteBody(b)) co_return true;
      }
      co_await x.response->End();
    } else if (path == "/hold") {
      const asio::any_io_executor executor = co_await asio::this_coro::executor;
      asio::steady_timer wait(executor, asio::steady_timer::time_point::max());
      x.stop.cancel_hook = [&] {
        ++cancelled;
        wait.cancel();
      };
      ++holding;
      co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
      x.stop.cancel_hook = nullptr;
      --holding;
    } else {
      co_await WriteWhole(*x.response, 404, "text/plain", "no");
    }
    co_return true;
  }
  std::string seen_authorization;
  int cancelled = 0;
  int holding = 0;
};

// An HTTP/2 server (kube-fanout's own session, as the apiserver's stand-in) on one side of a
// loopback pair, and an Http2Upstream on the other.
struct Rig {
  explicit Rig(const Http2Limits& limits = {}) {
    PipelineStages stages;
    stages.routes.is_local = [](std::string_view) { return true; };
    stages.local = &upstream;
    stages.relay = &upstream;
    pipeline.emplace(std::move(stages), log, stats);
    auto session =
        std::make_shared<HttpSession>(std::make_unique<AnyStream>(std::move(pair.server)),
                                      "127.0.0.1:5555", *pipeline, sessions, active, log);
    session->SetHttp2Limits(limits);
    session->Start(ioc.get_executor());
    connection = std::make_shared<Http2Upstream>(
        std::make_unique<AnyStream>(beast::tcp_stream(std::move(pair.client))), 0, &h2stats);
    REQUIRE(Run(ioc, connection->Start(Clock::now() + std::chrono::seconds(5))).ok());
  }
  std::unique_ptr<Http2UpstreamStream> Get(std::string path) {
    return connection->Submit({{":method", "GET"},
                               {":scheme", "http"},
                               {":authority", "upstream"},
                               {":path", std::move(path)},
                               {"authorization", "Bearer t"}});
  }
  // The whole body, read in 16 KiB pieces.
  asio::awaitable<std::string> ReadAll(Http2UpstreamStream& s) {
    std::string out;
    std::array<char, 16 * 1024> buf;
    for (;;) {
      auto [ec, n] = co_await s.ReadSome(buf, Clock::now() + std::chrono::seconds(5));
      if (ec || n == 0) break;
      out.append(buf.data(), n);
    }
    co_return out;
  }

  Logger log{2, Logger::Level::kError};
  RouteStats stats;
  Upstream upstream;
  std::optional<Pipeline> pipeline;
  SessionSet sessions;
  std::atomic<int64_t> active{0};
  asio::io_context ioc;
  LoopbackPair pair{ioc};
  Http2UpstreamStats h2stats;
  std::shared_ptr<Http2Upstream> connection;
};

TEST_CASE("Http2Upstream learns the server's stream limit before its first stream") {
  Rig r;
  CHECK(r.connection->max_streams() == 100);
  CHECK(r.connection->usable());
  CHECK(r.h2stats.connections == 1);
}

TEST_CASE("Http2Upstream carries concurrent requests on one connection, fields as Go writes") {
  Rig r;
  auto small = r.Get("/small");
  auto big = r.Get("/big");
  auto missing = r.Get("/missing");
  REQUIRE(small != nullptr);
  REQUIRE(big != nullptr);
  REQUIRE(missing != nullptr);
  CHECK(r.connection->open_streams() == 3);
  CHECK(r.h2stats.streams == 3);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  REQUIRE_FALSE(Run(r.ioc, small->ReadHead(deadline)));
  CHECK(small->status() == 200);
  CHECK(small->content_length() == 2);
  // HTTP/2's lower-case names, spelled as Go's HTTP/1.1 server spells them.
  CHECK(small->fields()["Content-Type"] == "application/json");
  bool canonical = false;
  for (const auto& f : small->fields()) canonical |= f.name_string() == "Content-Type";
  CHECK(canonical);
  CHECK(Run(r.ioc, r.ReadAll(*small)) == "ok");
  CHECK(small->done());
  CHECK(r.upstream.seen_authorization == "Bearer t");
  REQUIRE_FALSE(Run(r.ioc, big->ReadHead(deadline)));
  CHECK_FALSE(big->content_length().has_value());
  CHECK(Run(r.ioc, r.ReadAll(*big)).size() == 64 * 16 * 1024);
  REQUIRE_FALSE(Run(r.ioc, missing->ReadHead(deadline)));
  CHECK(missing->status() == 404);
  small.reset();
  big.reset();
  missing.reset();
  CHECK(r.connection->open_streams() == 0);
  CHECK(r.h2stats.streams == 0);
}

TEST_CASE("Http2Upstream holds at most a stream's window for a reader that stopped") {
  Rig r;
  auto stalled = r.Get("/big");
  REQUIRE(stalled != nullptr);
  REQUIRE_FALSE(Run(r.ioc, stalled->ReadHead(Clock::now() + std::chrono::seconds(5))));
  // Nobody reads it: it fills its window and no more.
  REQUIRE(RunUntil(r.ioc, [&] { return stalled->held() >= kUpstreamHttp2StreamWindow; }));
  r.ioc.run_for(std::chrono::milliseconds(50));
  CHECK(stalled->held() == kUpstreamHttp2StreamWindow);
  // The connection's other streams go on meanwhile.
  auto other = r.Get("/big");
  REQUIRE(other != nullptr);
  REQUIRE_FALSE(Run(r.ioc, other->ReadHead(Clock::now() + std::chrono::seconds(5))));
  CHECK(Run(r.ioc, r.ReadAll(*other)).size() == 64 * 16 * 1024);
  // And the stalled one gets the rest once read.
  CHECK(Run(r.ioc, r.ReadAll(*stalled)).size() == 64 * 16 * 1024);
}

TEST_CASE("Http2Upstream resets a cancelled stream, and its server's handler is cancelled") {
  Rig r;
  auto held = r.Get("/hold");
  REQUIRE(held != nullptr);
  REQUIRE(RunUntil(r.ioc, [&] { return r.upstream.holding == 1; }));
  held->Cancel();
  REQUIRE(RunUntil(r.ioc, [&] { return r.upstream.cancelled == 1 && r.upstream.holding == 0; }));
  std::array<char, 16> buf;
  auto [ec, n] = Run(r.ioc, held->ReadSome(buf, Clock::now() + std::chrono::seconds(1)));
  CHECK(ec == asio::error::operation_aborted);
  // The connection goes on.
  auto small = r.Get("/small");
  REQUIRE(small != nullptr);
  REQUIRE_FALSE(Run(r.ioc, small->ReadHead(Clock::now() + std::chrono::seconds(5))));
  CHECK(small->status() == 200);
}

TEST_CASE("Http2Upstream resets a stream its owner drops unfinished") {
  Rig r;
  auto held = r.Get("/hold");
  REQUIRE(RunUntil(r.ioc, [&] { return r.upstream.holding == 1; }));
  held.reset();
  REQUIRE(RunUntil(r.ioc, [&] { return r.upstream.cancelled == 1; }));
  CHECK(r.connection->open_streams() == 0);
}

TEST_CASE("Http2Upstream takes no more streams than the server allows") {
  Http2Limits limits;
  limits.max_concurrent_streams = 2;
  Rig r(limits);
  CHECK(r.connection->max_streams() == 2);
  auto a = r.Get("/hold");
  auto b = r.Get("/hold");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK_FALSE(r.connection->usable());
  CHECK(r.Get("/small") == nullptr);
  a.reset();
  CHECK(r.connection->usable());
}

TEST_CASE("Http2Upstream ends every open stream when its connection drops") {
  Rig r;
  auto a = r.Get("/hold");
  auto b = r.Get("/hold");
  REQUIRE(RunUntil(r.ioc, [&] { return r.upstream.holding == 2; }));
  r.connection->Close();
  std::array<char, 16> buf;
  for (auto* s : {a.get(), b.get()}) {
    auto [ec, n] = Run(r.ioc, s->ReadSome(buf, Clock::now() + std::chrono::seconds(5)));
    CHECK(ec);
    CHECK(n == 0);
  }
  REQUIRE(RunUntil(r.ioc, [&] { return r.connection->ended(); }));
  CHECK_FALSE(r.connection->usable());
  CHECK(r.Get("/small") == nullptr);
  CHECK(r.h2stats.lost_with_streams == 1);
}

}  // namespace
}  // namespace kf::test
