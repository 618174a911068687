#include "proxy/filters/passthrough_charge.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"
#include "tests/proxy/filters/admission_fixture.h"

namespace kf::test {
namespace {

// Reads for the cache at 100/s; what passes through at one per 2 s.
constexpr std::string_view kChargeConfig = R"(
apiVersion: kube-fanout.io/v1alpha1
kind: AdmissionConfiguration
totalConcurrency: 10
priorityLevels:
- name: tenants
  limited: {concurrencyShares: 1, queues: 4, handSize: 1, queueLengthLimit: 0}
flowSchemas:
- name: everyone
  priorityLevel: tenants
  matchingPrecedence: 100
  rateLimit: {qps: 0.5, burst: 1}
  cachedReadRateLimit: {qps: 100, burst: 100}
)";

struct ChargeFixture : AdmissionFixture {
  ChargeFixture() : AdmissionFixture(kChargeConfig) {}
  PassthroughCharge charge{admission};
};

// A GET of a cached resource admitted as alice, that the cache then declined.
struct Declined : FilterCall {
  explicit Declined(ChargeFixture& f)
      : FilterCall(http::verb::get, "/api/v1/namespaces/ns/pods/p") {
    x.user = Identity{"alice", {"system:authenticated"}};
    x.route = Route::kCache;
    NextProbe admitted;
    Run(f.ioc, f.filter.Serve(x, admitted.next()));
    REQUIRE(admitted.calls == 1);
    REQUIRE(x.admitted_as_cached_read);
    x.route = Route::kPassthrough;
  }
};

TEST_CASE("PassthroughCharge makes a declined cached read pay the passthrough budget") {
  ChargeFixture f;
  Declined first(f);
  Run(f.ioc, f.charge.Serve(first.x, first.next));
  CHECK(first.probe.calls == 1);
  CHECK_FALSE(first.x.admitted_as_cached_read);  // Paid.
  // Once paid, the same request is not charged again.
  NextProbe again;
  Run(f.ioc, f.charge.Serve(first.x, again.next()));
  CHECK(again.calls == 1);

  Declined second(f);  // Admitted at the cache's price: that budget has room.
  Run(f.ioc, f.charge.Serve(second.x, second.next));
  CheckRefused(second, 429, "2", "admission: rate-limited (everyone/tenants)");
  auto stats = f.admission.SchemaStatsSnapshot();
  CHECK(stats["everyone"].rejected["rate-limited"] == 1);
}

TEST_CASE("PassthroughCharge lets any other request on uncharged") {
  ChargeFixture f;
  FilterCall write(http::verb::post, "/api/v1/namespaces/ns/configmaps");
  for (int i = 0; i < 3; ++i) {
    NextProbe probe;
    Run(f.ioc, f.charge.Serve(write.x, probe.next()));
    CHECK(probe.calls == 1);
  }
}

}  // namespace
}  // namespace kf::test
