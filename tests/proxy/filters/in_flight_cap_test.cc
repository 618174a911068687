#include "proxy/filters/in_flight_cap.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kConfigMap = "/api/v1/namespaces/ns/configmaps/c";

// Serves `later` through `cap`, one after the other, and notes the count in flight after.
asio::awaitable<void> ServeAll(InFlightCap& cap, std::vector<FilterCall*> later,
                               int64_t* in_flight_after) {
  co_await ServeEach(cap, std::move(later));
  *in_flight_after = cap.in_flight();
}

// `first` goes through `cap`; while it is in flight, each of `later` does.
int64_t ServeWhileInFlight(asio::io_context& ioc, InFlightCap& cap, FilterCall& first,
                           std::vector<FilterCall*> later) {
  int64_t in_flight_meanwhile = -1;
  first.probe.then = [&](Exchange&) { return ServeAll(cap, later, &in_flight_meanwhile); };
  Run(ioc, cap.Serve(first.x, first.next));
  return in_flight_meanwhile;
}

TEST_CASE("InFlightCap refuses a request past its limit with 429 and Retry-After 1") {
  asio::io_context ioc;
  InFlightCap cap(1);
  FilterCall first(http::verb::post, "/api/v1/namespaces/ns/configmaps");
  FilterCall second(http::verb::get, std::string(kConfigMap));
  CHECK(ServeWhileInFlight(ioc, cap, first, {&second}) == 1);

  CHECK(first.probe.calls == 1);
  CHECK_FALSE(first.resp.head.has_value());  // The cap writes nothing for what it lets in.
  CheckRefused(second, 429, "1", "admission: upstream-busy");
  CHECK(cap.rejected() == 1);
  CHECK(cap.in_flight() == 0);  // Released once the first ended, and not kept for the refused.
}

TEST_CASE("InFlightCap lets the next request in once the one in flight has ended") {
  asio::io_context ioc;
  InFlightCap cap(1);
  for (int i = 0; i < 3; ++i) {
    FilterCall one(http::verb::get, std::string(kConfigMap));
    Run(ioc, cap.Serve(one.x, one.next));
    CHECK(one.probe.calls == 1);
    CHECK(cap.in_flight() == 0);
  }
  CHECK(cap.rejected() == 0);
}

TEST_CASE("InFlightCap does not count the exempt level, watches, tunnels, or with a limit of 0") {
  asio::io_context ioc;
  InFlightCap cap(1);
  FilterCall first(http::verb::get, std::string(kConfigMap));
  FilterCall exempt(http::verb::get, std::string(kConfigMap));
  exempt.x.priority_level = "exempt";
  FilterCall watch(http::verb::get, "/api/v1/namespaces/ns/configmaps?watch=1");
  FilterCall tunnel(http::verb::get, "/api/v1/namespaces/ns/pods/p/exec");
  tunnel.x.route = Route::kTunnel;
  CHECK(ServeWhileInFlight(ioc, cap, first, {&exempt, &watch, &tunnel}) == 1);
  CHECK(exempt.probe.calls == 1);
  CHECK(watch.probe.calls == 1);
  CHECK(tunnel.probe.calls == 1);
  CHECK(cap.rejected() == 0);

  InFlightCap unlimited(0);
  FilterCall again(http::verb::get, std::string(kConfigMap));
  FilterCall meanwhile(http::verb::get, std::string(kConfigMap));
  CHECK(ServeWhileInFlight(ioc, unlimited, again, {&meanwhile}) == 0);
  CHECK(meanwhile.probe.calls == 1);
}

}  // namespace
}  // namespace kf::test
