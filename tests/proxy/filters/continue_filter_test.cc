#include "proxy/filters/continue_filter.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kTarget = "/api/v1/namespaces/ns/configmaps";

TEST_CASE("ContinueFilter sends 100 Continue before the rest of the chain runs") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::post, std::string(kTarget));
  w.r.fields.set(http::field::expect, "100-continue");
  w.r.body.Set("{}");
  std::string seen_by_next;
  NextProbe probe;
  probe.then = [&](Exchange&) -> asio::awaitable<void> {
    seen_by_next = w.pair.ReadAvailable();
    co_return;
  };
  const Next next = probe.next();
  ContinueFilter filter;
  Run(ioc, filter.Serve(w.x, next));
  CHECK(probe.calls == 1);
  CHECK(seen_by_next == "HTTP/1.1 100 Continue\r\n\r\n");
}

TEST_CASE("ContinueFilter goes on without writing when the client expects nothing") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::post, std::string(kTarget));
  w.r.body.Set("{}");
  NextProbe probe;
  const Next next = probe.next();
  ContinueFilter filter;
  Run(ioc, filter.Serve(w.x, next));
  CHECK(probe.calls == 1);
  CHECK(w.pair.ReadAvailable().empty());
}

TEST_CASE("ContinueFilter stops when the 100 Continue cannot be written") {
  asio::io_context ioc;
  FilterCall call(http::verb::post, std::string(kTarget));
  call.resp.fail = asio::error::broken_pipe;
  ContinueFilter filter;
  Run(ioc, filter.Serve(call.x, call.next));
  CHECK(call.resp.continues == 1);
  CHECK(call.probe.calls == 0);
}

}  // namespace
}  // namespace kf::test
