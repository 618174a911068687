#include "tests/tools/churn_objects.h"

#include <time.h>

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "tests/tools/write_stamp.h"

namespace kf::tools {
namespace {

std::string Rfc3339Now() {
  const time_t now = time(nullptr);
  tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace

std::string_view KindName(Kind kind) {
  static constexpr std::array<std::string_view, kKinds> kNames = {
      "pods", "nodes", "endpointslices", "services", "configmaps", "events"};
  const auto i = static_cast<size_t>(kind);
  return i < kNames.size() ? kNames[i] : "unknown";
}

std::string ChurnObjects::NodeName(int64_t i) { return absl::StrCat("node-", i); }
std::string ChurnObjects::PodName(int64_t i) const {
  return absl::StrCat(naming_.prefix, "-pod-", i);
}
std::string ChurnObjects::ServiceName(int64_t i) const {
  return absl::StrCat(naming_.prefix, "-svc-", i);
}
std::string ChurnObjects::SliceName(int64_t i) const {
  return absl::StrCat(naming_.prefix, "-svc-", i, "-slice");
}
std::string ChurnObjects::ConfigMapName(int64_t i) { return absl::StrCat("lcm-", i); }

std::string ChurnObjects::Collection(Kind kind) const {
  if (kind == Kind::kNodes) return "/api/v1/nodes";
  if (kind == Kind::kEndpointSlices) {
    return absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", naming_.namespace_,
                        "/endpointslices");
  }
  return absl::StrCat("/api/v1/namespaces/", naming_.namespace_, "/", ToAbsl(KindName(kind)));
}

std::string ChurnObjects::Target(Kind kind, uint32_t object) const {
  switch (kind) {
    case Kind::kPods:
      return absl::StrCat(Collection(kind), "/", PodName(object));
    case Kind::kNodes:
      return absl::StrCat(Collection(kind), "/", NodeName(object));
    case Kind::kEndpointSlices:
      return absl::StrCat(Collection(kind), "/", SliceName(object));
    case Kind::kServices:
      return absl::StrCat(Collection(kind), "/", ServiceName(object));
    case Kind::kConfigMaps:
      return absl::StrCat(Collection(kind), "/", ConfigMapName(object));
    case Kind::kEvents:
      return Collection(kind);
  }
  return "";
}

std::string ChurnObjects::NodeJson(int n) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")", NodeName(n),
                      R"(","labels":{"kubernetes.io/hostname":")", NodeName(n), R"("}}})");
}

std::string ChurnObjects::PodJson(int i, int node, int configmap_volumes) const {
  std::string volumes;
  for (int k = 0; k < configmap_volumes; ++k) {
    absl::StrAppend(&volumes, k ? "," : R"(,"volumes":[)", R"({"name":"c)", k,
                    R"(","configMap":{"name":")", ConfigMapName(k), R"("}})");
  }
  if (!volumes.empty()) volumes += "]";
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", PodName(i),
                      R"(","namespace":")", naming_.namespace_, R"(","labels":{"app":"kf-)",
                      naming_.prefix, R"(","shard":")", i % 16, R"("}},"spec":{"nodeName":")",
                      NodeName(node),
                      R"(","automountServiceAccountToken":false,"containers":[{"name":"app",)"
                      R"("image":"registry.k8s.io/pause:3.10","ports":[{"containerPort":8080}],)"
                      R"("resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}])",
                      volumes, "}}");
}

std::string ChurnObjects::ServiceJson(int i) const {
  // No selector: the slices are written here, not by a controller (the rig has none anyway).
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")", ServiceName(i),
                      R"(","namespace":")", naming_.namespace_,
                      R"("},"spec":{"ports":[{"name":"http","port":80,"targetPort":8080,)"
                      R"("protocol":"TCP"}]}})");
}

std::string ChurnObjects::SliceJson(int i, int endpoints, int nodes, std::mt19937& rng) const {
  std::string eps;
  for (int k = 0; k < endpoints; ++k) {
    const int host = i * endpoints + k;
    absl::StrAppend(&eps, k ? "," : "", R"({"addresses":["10.)",
                    naming_.address_octet + host / 65536, ".", (host / 256) % 256, ".", host % 256,
                    R"("],"conditions":{"ready":true,"serving":true,"terminating":false},)"
                    R"("nodeName":")",
                    NodeName(rng() % static_cast<uint32_t>(std::max(1, nodes))),
                    R"(","targetRef":{"kind":"Pod","namespace":")", naming_.namespace_,
                    R"(","name":"backend-)", host, R"("}})");
  }
  return absl::StrCat(
      R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")",
      SliceName(i), R"(","namespace":")", naming_.namespace_,
      R"(","labels":{"kubernetes.io/service-name":")", ServiceName(i),
      R"(","endpointslice.kubernetes.io/managed-by":")", naming_.manager,
      R"("}},)"
      R"("addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],)"
      R"("endpoints":[)",
      eps, "]}");
}

std::string ChurnObjects::ConfigMapJson(int i) const {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
                      ConfigMapName(i), R"(","namespace":")", naming_.namespace_,
                      R"("},"data":{"config.yaml":"level: info\n"}})");
}

std::string ChurnObjects::EventJson(const std::string& name, int pod) const {
  const std::string now = Rfc3339Now();
  const std::string& ns = naming_.namespace_;
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Event","metadata":{"name":")", name,
                      R"(","namespace":")", ns, R"(","annotations":{")",
                      ToAbsl(kWrittenAtAnnotation), R"(":")", UnixNanos(),
                      R"("}},"involvedObject":{"apiVersion":"v1","kind":"Pod","namespace":")", ns,
                      R"(","name":")", PodName(pod),
                      R"("},"reason":"LoadTest","message":"kf-load churn event","type":"Normal",)"
                      R"("source":{"component":"kf-load"},"firstTimestamp":")",
                      now, R"(","lastTimestamp":")", now, R"(","count":1})");
}

}  // namespace kf::tools
