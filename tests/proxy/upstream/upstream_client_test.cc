#include "proxy/upstream/upstream_client.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("Retry-After in delta-seconds is read, anything else is ignored") {
  CHECK(ParseRetryAfter("1") == seconds(1));
  CHECK(ParseRetryAfter(" 30 ") == seconds(30));
  CHECK(ParseRetryAfter("0") == seconds(0));
  CHECK(ParseRetryAfter("999999999") == seconds(999999999));
  CHECK_FALSE(ParseRetryAfter("1000000000"));  // More than 9 digits: not read.
  CHECK_FALSE(ParseRetryAfter(""));
  CHECK_FALSE(ParseRetryAfter("-1"));
  CHECK_FALSE(ParseRetryAfter("+1"));
  CHECK_FALSE(ParseRetryAfter("1.5"));
  CHECK_FALSE(ParseRetryAfter("Fri, 31 Dec 1999 23:59:59 GMT"));
}

TEST_CASE("The wait after a failure is the backoff, or a longer Retry-After up to the cap") {
  CHECK(RetryWait(std::nullopt, milliseconds(250), seconds(30)) == milliseconds(250));
  CHECK(RetryWait(seconds(2), milliseconds(250), seconds(30)) == seconds(2));
  CHECK(RetryWait(seconds(0), milliseconds(250), seconds(30)) == milliseconds(250));
  CHECK(RetryWait(seconds(1), seconds(8), seconds(30)) == seconds(8));
  CHECK(RetryWait(seconds(3600), milliseconds(250), seconds(30)) == seconds(30));
}

TEST_CASE("A 429 or 503 answer carries its Retry-After") {
  asio::io_context ioc;
  FakeUpstream up{ioc};
  up.answer =
      "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
      "Retry-After: 3\r\nContent-Length: 2\r\n\r\n{}";
  Spawn(ioc, FakeUpstream::ServeOne(&up));
  auto res = Run(ioc, UpstreamCall(up.pool, http::verb::get, "/api/v1/pods", ""));
  REQUIRE(res.ok());
  CHECK(res->status == 429);
  CHECK(res->retry_after == seconds(3));

  up.answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
  Spawn(ioc, FakeUpstream::ServeOne(&up));
  res = Run(ioc, UpstreamCall(up.pool, http::verb::get, "/api/v1/pods", ""));
  REQUIRE(res.ok());
  CHECK(res->status == 503);
  CHECK_FALSE(res->retry_after);

  // A watch refused the same way.
  up.answer =
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 0\r\n"
      "Connection: close\r\n\r\n";
  Spawn(ioc, FakeUpstream::ServeOne(&up));
  auto opened = Run(ioc, UpstreamWatch::Open(up.pool, "/api/v1/pods?watch=true", "", seconds(5)));
  REQUIRE(opened.ok());
  REQUIRE(opened->index() == 1);
  CHECK(std::get<1>(*opened).status == 429);
  CHECK(std::get<1>(*opened).retry_after == seconds(7));
}

TEST_CASE("An idle pooled connection its upstream closed is not written to: a new one is used") {
  asio::io_context ioc;
  FakeUpstream up{ioc};
  // Keep-alive: the pool keeps the connection; then the fake upstream closes its side.
  up.answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
  auto server = Spawn(ioc, FakeUpstream::ServeOne(&up));
  auto res = Run(ioc, UpstreamCall(up.pool, http::verb::post, "/apis/x", "", R"({"n":1})"));
  REQUIRE(res.ok());
  REQUIRE(RunUntil(ioc, [&] { return server.finished(); }));  // Its FIN is on the way.
  CHECK(up.stats.stale_idle.load() == 0);

  up.request = {};
  server = Spawn(ioc, FakeUpstream::ServeOne(&up));
  res = Run(ioc, UpstreamCall(up.pool, http::verb::post, "/apis/x", "", R"({"n":2})"));
  REQUIRE(res.ok());
  CHECK(res->status == 200);
  CHECK(up.request.body() == R"({"n":2})");
  CHECK(up.stats.stale_idle.load() == 1);
  // Not written to the closed connection first and sent again (what the pool did before it
  // looked).
  CHECK(up.stats.stale_in_use.load() == 0);
  REQUIRE(RunUntil(ioc, [&] { return server.finished(); }));

  // An idle connection still open is reused (the one above, closed too, was not).
  up.hold = seconds(2);
  server = Spawn(ioc, FakeUpstream::ServeOne(&up));
  res = Run(ioc, UpstreamCall(up.pool, http::verb::get, "/api/v1/pods", ""));
  REQUIRE(res.ok());
  CHECK(up.stats.stale_idle.load() == 2);
  auto lease = Run(ioc, up.pool.Acquire(/*allow_reuse=*/true));
  REQUIRE(lease.ok());
  CHECK(lease->reused);
  CHECK(up.stats.stale_idle.load() == 2);
  lease->stream.reset();
  REQUIRE(RunUntil(ioc, [&] { return server.finished(); }));
}

TEST_CASE("A watch silent past its idle timeout fails with DeadlineExceeded, not before") {
  asio::io_context ioc;
  FakeUpstream up{ioc};
  up.answer =  // One event, then silence, the connection open.
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nline\n\r\n";
  up.hold = seconds(3);
  const auto server = Spawn(ioc, FakeUpstream::ServeOne(&up));
  auto opened =
      Run(ioc, UpstreamWatch::Open(up.pool, "/api/v1/pods?watch=true", "", milliseconds(300)));
  REQUIRE(opened.ok());
  REQUIRE(opened->index() == 0);
  UpstreamWatch& watch = *std::get<0>(*opened);
  auto first = Run(ioc, watch.NextLine());
  REQUIRE(first.ok());
  CHECK(*first == "line");
  const auto started = std::chrono::steady_clock::now();
  auto next = Run(ioc, watch.NextLine());
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(absl::IsDeadlineExceeded(next.status()));
  CHECK(waited >= milliseconds(250));
  CHECK(waited < seconds(2));  // Well before the server gives up.
  REQUIRE(RunUntil(ioc, [&] { return server.finished(); }));
}

}  // namespace
}  // namespace kf::test
