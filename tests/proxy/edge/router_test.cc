#include "proxy/edge/router.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

RoutingTable Table() {
  RoutingTable t;
  t.is_local = [](std::string_view path) { return path == "/healthz" || path == "/metrics"; };
  t.is_cached = [](const RequestInfo& info) { return info.resource == "pods"; };
  return t;
}

TEST_CASE("RouteOf sends GET and HEAD of kube-fanout's own paths to the local handler") {
  TestRequest get(http::verb::get, "/healthz");
  TestRequest head(http::verb::head, "/metrics");
  CHECK(RouteOf(get.request, Table()) == Route::kLocal);
  CHECK(RouteOf(head.request, Table()) == Route::kLocal);
}

TEST_CASE("RouteOf passes other methods and other paths on a local name through") {
  TestRequest post(http::verb::post, "/healthz");
  TestRequest other(http::verb::get, "/version");
  CHECK(RouteOf(post.request, Table()) == Route::kPassthrough);
  CHECK(RouteOf(other.request, Table()) == Route::kPassthrough);
}

TEST_CASE("RouteOf never answers a resource request locally, even if its path is local") {
  RoutingTable t = Table();
  t.is_local = [](std::string_view) { return true; };
  t.is_cached = nullptr;
  TestRequest pods(http::verb::get, "/api/v1/pods");
  CHECK(RouteOf(pods.request, t) == Route::kPassthrough);
}

TEST_CASE("RouteOf tunnels a protocol upgrade, even of a cached resource") {
  TestRequest exec(http::verb::get, "/api/v1/namespaces/ns/pods/p/exec?command=sh");
  exec.fields.set(http::field::connection, "Upgrade");
  exec.fields.set(http::field::upgrade, "SPDY/3.1");
  CHECK(RouteOf(exec.request, Table()) == Route::kTunnel);
}

TEST_CASE("RouteOf sends a bodiless GET of a cached resource to the cache") {
  TestRequest list(http::verb::get, "/api/v1/pods");
  TestRequest get(http::verb::get, "/api/v1/namespaces/ns/pods/p");
  TestRequest watch(http::verb::get, "/api/v1/pods?watch=1");
  CHECK(RouteOf(list.request, Table()) == Route::kCache);
  CHECK(RouteOf(get.request, Table()) == Route::kCache);
  CHECK(RouteOf(watch.request, Table()) == Route::kCache);
}

TEST_CASE("RouteOf passes through what is not cached, has a body, or is not a GET") {
  TestRequest uncached(http::verb::get, "/api/v1/configmaps");
  CHECK(RouteOf(uncached.request, Table()) == Route::kPassthrough);

  TestRequest bodied(http::verb::get, "/api/v1/pods");
  bodied.body.Set("{}");
  CHECK(RouteOf(bodied.request, Table()) == Route::kPassthrough);

  TestRequest post(http::verb::post, "/api/v1/namespaces/ns/pods");
  CHECK(RouteOf(post.request, Table()) == Route::kPassthrough);

  TestRequest head(http::verb::head, "/api/v1/pods");
  CHECK(RouteOf(head.request, Table()) == Route::kPassthrough);

  RoutingTable nothing_cached = Table();
  nothing_cached.is_cached = nullptr;
  TestRequest list(http::verb::get, "/api/v1/pods");
  CHECK(RouteOf(list.request, nothing_cached) == Route::kPassthrough);
}

}  // namespace
}  // namespace kf::test
