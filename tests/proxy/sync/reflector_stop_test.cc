#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "proxy/sync/reflector.h"
#include "tests/cache/test_objects.h"
#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// An apiserver stand-in for one reflector: no bookmark template (404), an empty LIST, and a
// WATCH whose answer waits until the test says so (`release`), then stays open.
struct SlowWatchUpstream {
  explicit SlowWatchUpstream(asio::io_context& ioc) : up(ioc) {}
  test::FakeUpstream up;
  bool watch_asked = false;
  bool release = false;

  static asio::awaitable<void> Serve(SlowWatchUpstream* s) {
    for (;;) {
      auto [aec, socket] = co_await s->up.acceptor.async_accept(use_nothrow);
      if (aec) co_return;
      asio::co_spawn(s->up.acceptor.get_executor(), Connection(s, std::move(socket)),
                     asio::detached);
    }
  }

  static asio::awaitable<void> Connection(SlowWatchUpstream* s, asio::ip::tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      auto [rec, rn] = co_await http::async_read(socket, buffer, req, use_nothrow);
      if (rec) co_return;
      const std::string target(req.target());
      std::string answer;
      if (target.find("metadata.name%3D-") != std::string::npos) {
        answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
      } else if (target.find("watch=true") != std::string::npos) {
        s->watch_asked = true;
        asio::steady_timer timer(socket.get_executor());
        while (!s->release) {
          timer.expires_after(std::chrono::milliseconds(5));
          co_await timer.async_wait(use_nothrow);
        }
        answer =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "\r\n";
        (void)co_await asio::async_write(socket, asio::buffer(answer), use_nothrow);
        // Open and silent, as a quiet resource's watch is, until the client leaves.
        std::string rest;
        (void)co_await asio::async_read_until(socket, asio::dynamic_buffer(rest), "\n",
                                              use_nothrow);
        co_return;
      } else {
        const std::string list =
            R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]})";
        answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(list.size()) + "\r\n\r\n" + list;
      }
      auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(answer), use_nothrow);
      if (wec) co_return;
    }
  }
};

}  // namespace

// At shutdown a reflector is stopped wherever it is. Stopped while its watch is being opened
// (the request sent, the answer not yet in), it has nothing to cancel yet: without a check once
// the watch is open, the watch would run its 5-10 minutes and the process's shutdown wait for it
// ("shutting down", then nothing until the rig's SIGKILL).
TEST_CASE("a reflector stopped while its watch opens ends as soon as the watch is open") {
  asio::io_context ioc;
  SlowWatchUpstream upstream(ioc);
  test::Spawn(ioc, SlowWatchUpstream::Serve(&upstream));
  Cacher cacher(testing::PodsType(), EventRingLimits{},
                [] { return std::chrono::steady_clock::now(); });
  Logger log(2, Logger::Level::kError);
  Reflector reflector(
      cacher, upstream.up.pool, [] { return std::string(); }, log, ioc.get_executor());
  const test::Spawned run = test::Spawn(ioc, reflector.Run());
  REQUIRE(test::RunUntil(ioc, [&] { return upstream.watch_asked; }));
  CHECK(cacher.synced());  // It listed, and is opening its watch.
  reflector.Stop();
  upstream.release = true;  // The watch's answer comes after the stop.
  CHECK(test::RunUntil(
      ioc, [&] { return run.finished(); }, std::chrono::seconds(3)));
  run.Rethrow();
}

}  // namespace kf
