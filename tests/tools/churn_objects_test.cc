#include "tests/tools/churn_objects.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "rapidjson/document.h"

namespace kf::tools {
namespace {

const ChurnObjects kBench({"kf-bench", "bench", "kf-fanout-bench", 64});
const ChurnObjects kLoad({"kf-load", "load", "kf-load", 128});

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  REQUIRE_FALSE(doc.HasParseError());
  return doc;
}

TEST_CASE("ChurnObjects names and paths keep the benchmark's objects apart from the load test's") {
  CHECK(kBench.Target(Kind::kPods, 7) == "/api/v1/namespaces/kf-bench/pods/bench-pod-7");
  CHECK(kBench.Target(Kind::kEndpointSlices, 3) ==
        "/apis/discovery.k8s.io/v1/namespaces/kf-bench/endpointslices/bench-svc-3-slice");
  CHECK(kLoad.Target(Kind::kPods, 7) == "/api/v1/namespaces/kf-load/pods/load-pod-7");
  CHECK(kLoad.Target(Kind::kNodes, 2) == "/api/v1/nodes/node-2");
  CHECK(kLoad.Target(Kind::kConfigMaps, 1) == "/api/v1/namespaces/kf-load/configmaps/lcm-1");
  CHECK(kLoad.Target(Kind::kEvents, 9) == "/api/v1/namespaces/kf-load/events");
  CHECK(kLoad.Collection(Kind::kServices) == "/api/v1/namespaces/kf-load/services");
  CHECK(KindName(Kind::kEndpointSlices) == "endpointslices");
}

TEST_CASE("ChurnObjects writes well-formed objects with the scenario's names and labels") {
  const auto pod = Parse(kBench.PodJson(5, 42));
  CHECK(std::string(pod["metadata"]["name"].GetString()) == "bench-pod-5");
  CHECK(std::string(pod["metadata"]["labels"]["app"].GetString()) == "kf-bench");
  CHECK(std::string(pod["spec"]["nodeName"].GetString()) == "node-42");

  std::mt19937 rng(8);
  const auto slice = Parse(kLoad.SliceJson(1, 3, 10, rng));
  CHECK(std::string(slice["metadata"]["name"].GetString()) == "load-svc-1-slice");
  CHECK(std::string(
            slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"].GetString()) ==
        "kf-load");
  REQUIRE(slice["endpoints"].Size() == 3);
  CHECK(std::string(slice["endpoints"][0]["addresses"][0].GetString()) == "10.128.0.3");

  CHECK(Parse(ChurnObjects::NodeJson(3))["metadata"]["name"] == "node-3");
  CHECK(Parse(kLoad.ServiceJson(4))["metadata"]["name"] == "load-svc-4");
  CHECK(Parse(kLoad.ConfigMapJson(0))["metadata"]["name"] == "lcm-0");
  const auto event = Parse(kLoad.EventJson("load-evt-1", 6));
  CHECK(std::string(event["involvedObject"]["name"].GetString()) == "load-pod-6");
  CHECK(event["metadata"]["annotations"].HasMember("kube-fanout.bench/written-at"));
}

}  // namespace
}  // namespace kf::tools
