#include "proxy/filters/admission_filter.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"
#include "tests/proxy/filters/admission_fixture.h"

namespace kf::test {
namespace {

// Admins exempt; everyone else one seat at "tenants", GET/LIST metered at one per 2 s.
constexpr std::string_view kConfig = R"(
apiVersion: kube-fanout.io/v1alpha1
kind: AdmissionConfiguration
totalConcurrency: 1
priorityLevels:
- name: exempt
  type: Exempt
- name: tenants
  limited: {concurrencyShares: 1000, queues: 4, handSize: 1, queueLengthLimit: 0,
            queueWaitSeconds: 1}
flowSchemas:
- name: admins
  priorityLevel: exempt
  matchingPrecedence: 1
  rules:
  - users: [admin]
- name: everyone
  priorityLevel: tenants
  matchingPrecedence: 100
  distinguisherMethod: ByUser
  rateLimit: {qps: 0.5, burst: 1}
)";

struct Fixture : AdmissionFixture {
  Fixture() : AdmissionFixture(kConfig) {}
};

// One request through the filter as `user`.
struct Call : FilterCall {
  Call(std::string user, std::string target) : FilterCall(http::verb::get, std::move(target)) {
    x.user = Identity{std::move(user), {"system:authenticated"}};
  }
};

int Executing(const ratelimit::Admission& a) { return a.LevelStatsSnapshot()["tenants"].executing; }

// Serves `c` and returns the requests executing at "tenants" while it went on.
int ExecutingWhileServed(Fixture& f, Call& c) {
  int executing = -1;
  c.probe.then = [&](Exchange&) -> asio::awaitable<void> {
    executing = Executing(f.admission);
    co_return;
  };
  Run(f.ioc, f.filter.Serve(c.x, c.next));
  return executing;
}

TEST_CASE("AdmissionFilter lets an admitted request on and notes its priority level") {
  Fixture f;
  Call c("alice", "/api/v1/namespaces/ns/pods/p");
  // The seat is held while the request runs, and freed when it ends.
  CHECK(ExecutingWhileServed(f, c) == 1);
  CHECK(Executing(f.admission) == 0);
  CHECK(c.probe.calls == 1);
  CHECK(c.x.priority_level == "tenants");
  CHECK(c.x.answer == Answer::kPassthrough);
  CHECK_FALSE(c.resp.head.has_value());
}

TEST_CASE("AdmissionFilter answers a rate-limited request 429 with Retry-After, not going on") {
  Fixture f;
  Call first("alice", "/api/v1/namespaces/ns/pods");
  Run(f.ioc, f.filter.Serve(first.x, first.next));
  REQUIRE(first.probe.calls == 1);

  Call second("alice", "/api/v1/namespaces/ns/pods");
  Run(f.ioc, f.filter.Serve(second.x, second.next));
  CheckRefused(second, 429, "2", "admission: rate-limited (everyone/tenants)");
  CHECK(second.resp.body.find("\"reason\":\"TooManyRequests\"") != std::string::npos);
  CHECK(second.resp.ended);

  Call other_user("bob", "/api/v1/namespaces/ns/pods");  // Another flow, its own bucket.
  Run(f.ioc, f.filter.Serve(other_user.x, other_user.next));
  CHECK(other_user.probe.calls == 1);
}

TEST_CASE("AdmissionFilter frees a watch's seat once the watch is admitted") {
  Fixture f;
  Call watch("alice", "/api/v1/namespaces/ns/pods?watch=1");
  CHECK(ExecutingWhileServed(f, watch) == 0);
  CHECK(watch.probe.calls == 1);
}

TEST_CASE("AdmissionFilter lets the exempt level past a full level") {
  Fixture f;
  Call holder("alice", "/api/v1/namespaces/ns/pods/p");
  Call admin("admin", "/api/v1/namespaces/ns/pods/p");
  Call refused("carol", "/api/v1/namespaces/ns/pods/p");
  // While alice holds the only seat: the admin goes on, carol finds no seat and no queue room.
  holder.probe.then = [&](Exchange&) { return ServeEach(f.filter, {&admin, &refused}); };
  Run(f.ioc, f.filter.Serve(holder.x, holder.next));
  CHECK(admin.probe.calls == 1);
  CHECK(admin.x.priority_level == "exempt");
  CheckRefused(refused, 429, "1", "admission: queue-full (everyone/tenants)");
}

TEST_CASE("AdmissionFilter classifies by the identity, the verb and the request's shape") {
  TestRequest watch(http::verb::get, "/apis/apps/v1/namespaces/ns/deployments?watch=true");
  watch.fields.set(http::field::user_agent, "kubectl/v1.30");
  RecordingResponse resp;
  Exchange x{watch.request, &resp, watch.stop};
  x.user = Identity{"alice", {"devs"}};
  const ratelimit::RequestAttributes a = AdmissionFilter::Attributes(x);
  CHECK(a.user == "alice");
  CHECK(a.groups == std::vector<std::string>{"devs"});
  CHECK(a.user_agent == "kubectl/v1.30");
  CHECK(a.source == "10.0.0.7");
  CHECK(a.resource_request);
  CHECK(a.verb == "watch");
  CHECK(a.long_running);
  CHECK(a.api_group == "apps");
  CHECK(a.resource == "deployments");
  CHECK(a.namespace_ == "ns");

  TestRequest version(http::verb::get, "/version");
  Exchange vx{version.request, &resp, version.stop};
  const ratelimit::RequestAttributes v = AdmissionFilter::Attributes(vx);
  CHECK_FALSE(v.resource_request);
  CHECK(v.verb == "get");
  CHECK(v.path == "/version");
  CHECK(v.user.empty());
  CHECK_FALSE(v.long_running);

  CHECK_FALSE(a.cached_read);  // Routed to passthrough.
  CHECK(a.bound_to.empty());

  // No credentials, or rejected ones: one anonymous user, as APF has it.
  vx.unauthenticated = true;
  const ratelimit::RequestAttributes anon = AdmissionFilter::Attributes(vx);
  CHECK(anon.user == "system:anonymous");
  CHECK(anon.groups == std::vector<std::string>{"system:unauthenticated"});
  CHECK(anon.user_agent.empty());
}

TEST_CASE("AdmissionFilter reads the node, else the pod, a bound token's user names") {
  Identity sa{"system:serviceaccount:logging:rsyslog", {"system:serviceaccounts"}};
  CHECK(AdmissionFilter::BoundTo(sa).empty());
  sa.extra = {{"authentication.kubernetes.io/credential-id", {"JTI=1"}},
              {"authentication.kubernetes.io/pod-name", {"rsyslog-x2k"}},
              {"authentication.kubernetes.io/pod-uid", {"0f3c"}}};
  CHECK(AdmissionFilter::BoundTo(sa) == "pod/rsyslog-x2k");
  sa.extra.insert(sa.extra.begin() + 1, {"authentication.kubernetes.io/node-name", {"n7"}});
  CHECK(AdmissionFilter::BoundTo(sa) == "node/n7");

  TestRequest get(http::verb::get, "/api/v1/namespaces/ns/pods/p");
  RecordingResponse resp;
  Exchange x{get.request, &resp, get.stop};
  x.user = sa;
  x.route = Route::kCache;
  const ratelimit::RequestAttributes a = AdmissionFilter::Attributes(x);
  CHECK(a.cached_read);
  CHECK(a.bound_to == "node/n7");
}

TEST_CASE("AdmissionFilter notes the flow of a read it let in at the cache's price") {
  Fixture f;
  Call c("alice", "/api/v1/namespaces/ns/pods/p");
  c.x.route = Route::kCache;
  Run(f.ioc, f.filter.Serve(c.x, c.next));
  CHECK(c.probe.calls == 1);
  CHECK(c.x.admitted_as_cached_read);
  CHECK(c.x.flow_schema == "everyone");
  CHECK(c.x.flow_key == "everyone/alice");
}

}  // namespace
}  // namespace kf::test
