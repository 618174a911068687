#include "proxy/server/health.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("HealthChecks answers ok, verbose listings and single checks like the apiserver") {
  HealthChecks h;
  const Query none;
  auto r = h.Handle("/readyz", none);
  REQUIRE(r);
  CHECK(r->code == 200);
  CHECK(r->body == "ok");

  r = h.Handle("/livez", Query::Parse("verbose"));
  REQUIRE(r);
  CHECK(r->body == "[+]ping ok\nlivez check passed\n");

  r = h.Handle("/readyz/ping", none);
  REQUIRE(r);
  CHECK(r->body == "ok");

  r = h.Handle("/healthz/nope", none);
  REQUIRE(r);
  CHECK(r->code == 404);

  CHECK_FALSE(h.Handle("/healthzz", none));
  CHECK_FALSE(h.Handle("/version", none));
}

TEST_CASE("HealthChecks fails readyz, and only readyz, once shutting down") {
  HealthChecks h;
  h.SetShuttingDown();
  const Query none;
  auto ready = h.Handle("/readyz", none);
  REQUIRE(ready);
  CHECK(ready->code == 500);
  CHECK(ready->body == "[+]ping ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n");
  CHECK(h.Handle("/livez", none)->code == 200);
  CHECK(h.Handle("/healthz", none)->code == 200);
  CHECK(h.Handle("/readyz", Query::Parse("exclude=shutdown"))->code == 200);
}

TEST_CASE("HealthChecks runs added checks on the endpoints they were added to") {
  HealthChecks h;
  bool synced = false;
  h.Add("cache-sync", {HealthChecks::Endpoint::kReadyz},
        [&] { return synced ? absl::OkStatus() : absl::UnavailableError("not synced"); });
  const Query none;
  CHECK(h.Handle("/readyz", none)->code == 500);
  CHECK(h.Handle("/livez", none)->code == 200);
  synced = true;
  CHECK(h.Handle("/readyz", none)->code == 200);
}

}  // namespace
}  // namespace kf
