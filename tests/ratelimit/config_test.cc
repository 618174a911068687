#include "ratelimit/config.h"

#include <catch2/catch.hpp>

namespace kf::ratelimit {
namespace {

constexpr char kGood[] = R"(
apiVersion: kube-fanout.io/v1alpha1
kind: AdmissionConfiguration
totalConcurrency: 100
priorityLevels:
- name: exempt
  type: Exempt
- name: pollers
  limited:
    concurrencyShares: 10
    queues: 32
    handSize: 4
    queueLengthLimit: 20
    queueWaitSeconds: 2.5
flowSchemas:
- name: catch-all-pollers
  priorityLevel: pollers
  matchingPrecedence: 9000
  distinguisherMethod: ByNamespace
- name: fluentd
  priorityLevel: pollers
  matchingPrecedence: 100
  rules:
  - userAgents: ["fluent*"]
    verbs: [get, list]
    resources: [pods, namespaces]
  rateLimit: {qps: 1, burst: 3}
  cachedReadRateLimit: {qps: 50}
  dropManagedFields: true
)";

TEST_CASE("ParseConfig reads levels and schemas and sorts schemas by precedence") {
  auto c = ParseConfig(kGood);
  REQUIRE(c.ok());
  CHECK(c->total_concurrency == 100);
  REQUIRE(c->priority_levels.size() == 2);
  CHECK(c->priority_levels[0].exempt);
  CHECK(c->priority_levels[1].queue_wait == std::chrono::milliseconds(2500));
  CHECK(c->priority_levels[1].hand_size == 4);
  REQUIRE(c->flow_schemas.size() == 2);
  CHECK(c->flow_schemas[0].name == "fluentd");
  CHECK(c->flow_schemas[0].rate_limit.qps == 1);
  REQUIRE(c->flow_schemas[0].cached_read_rate_limit.has_value());
  CHECK(c->flow_schemas[0].cached_read_rate_limit->qps == 50);
  CHECK(c->flow_schemas[0].cached_read_rate_limit->burst == 50);  // Burst: qps when unset.
  CHECK_FALSE(c->flow_schemas[1].cached_read_rate_limit.has_value());
  CHECK(c->flow_schemas[0].drop_managed_fields);
  CHECK_FALSE(c->flow_schemas[1].drop_managed_fields);
  CHECK(c->flow_schemas[0].rules[0].user_agents == std::vector<std::string>{"fluent*"});
  CHECK(c->flow_schemas[1].distinguisher == Distinguisher::kByNamespace);
}

TEST_CASE("ParseConfig names the field that is wrong") {
  auto err = [](const std::string& yaml) {
    return std::string(ParseConfig(yaml).status().message());
  };
  const std::string head = "apiVersion: kube-fanout.io/v1alpha1\nkind: AdmissionConfiguration\n";
  CHECK(err("kind: Foo\n").find("want apiVersion kube-fanout.io/v1alpha1") != std::string::npos);
  CHECK(err(head + "bogus: 1\n") == "config.bogus: unknown field");
  CHECK(err(head + "flowSchemas:\n- name: a\n  priorityLevel: nope\n") ==
        "flowSchemas[a].priorityLevel: no priority level \"nope\"");
  CHECK(err(head + "priorityLevels:\n- name: l\n  limited: {queues: 2, handSize: 3}\n"
                   "flowSchemas:\n- {name: a, priorityLevel: l}\n") ==
        "priorityLevels[0].limited.handSize: must be between 1 and queues");
  CHECK(err(head + "totalConcurrency: many\n") == "config.totalConcurrency: wrong type");
  CHECK(err(head +
            "priorityLevels: [{name: l}]\n"
            "flowSchemas:\n- {name: a, priorityLevel: l, cachedReadRateLimit: {qps: 0}}\n") ==
        "flowSchemas[0].cachedReadRateLimit.qps: must be > 0");
  CHECK(err(head + "priorityLevels: [{name: l}]\n"
                   "flowSchemas:\n- {name: a, priorityLevel: l, dropManagedFields: [yes]}\n") ==
        "flowSchemas[0].dropManagedFields: wrong type");
  CHECK(err("{").find("not a valid configuration") == 0);
  CHECK(err(head + "priorityLevels: []\nflowSchemas: []\n") ==
        "flowSchemas: at least one is required");
}

TEST_CASE("ParseConfig turns hostile YAML into an error, never an exception") {
  const std::string head = "apiVersion: kube-fanout.io/v1alpha1\nkind: AdmissionConfiguration\n";
  // A mapping as a mapping key (yaml-cpp throws on converting it to a string).
  auto a = ParseConfig(head + "? {a: b}\n: c\n");
  REQUIRE_FALSE(a.ok());
  CHECK(std::string(a.status().message()) == "config: field names must be strings");
  auto b = ParseConfig(head + "flowSchemas:\n- ? [x]\n  : y\n");
  REQUIRE_FALSE(b.ok());
  // Nesting deep enough to exhaust a recursive parser's stack.
  CHECK_FALSE(ParseConfig(head + "x: " + std::string(100000, '[')).ok());
  CHECK_FALSE(ParseConfig(std::string(100000, '-') + " a").ok());
  CHECK_FALSE(ParseConfig(head + "flowSchemas: " + std::string(2u << 20, ' ') + "[]").ok());
  // Scalars where mappings or lists belong.
  CHECK_FALSE(ParseConfig(head + "priorityLevels: [1, 2]\nflowSchemas: x\n").ok());
  CHECK_FALSE(ParseConfig(head + "priorityLevels:\n- name: [a]\n").ok());
}

TEST_CASE("GlobMatch takes a star alone or at the end") {
  CHECK(GlobMatch("*", ""));
  CHECK(GlobMatch("fluent*", "fluent-bit/2.1"));
  CHECK_FALSE(GlobMatch("fluent*", "Fluent"));
  CHECK(GlobMatch("pods", "pods"));
  CHECK_FALSE(GlobMatch("pods", "pods/log"));
}

}  // namespace
}  // namespace kf::ratelimit
