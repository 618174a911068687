// ChurnObjects: the names, API paths and JSON bodies of the objects the churn makes and writes:
// Nodes node-N, pods <prefix>-pod-N bound to a node, Services <prefix>-svc-N with one
// EndpointSlice <prefix>-svc-N-slice each, ConfigMaps lcm-N, and core/v1 Events about a pod.
// The prefix keeps the fan-out benchmark's objects ("bench") apart from the load test's
// ("load"). Pure and immutable; any thread.
#ifndef KUBE_FANOUT_TESTS_TOOLS_CHURN_OBJECTS_H_
#define KUBE_FANOUT_TESTS_TOOLS_CHURN_OBJECTS_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace kf::tools {

enum class Kind : uint8_t { kPods, kNodes, kEndpointSlices, kServices, kConfigMaps, kEvents };
inline constexpr int kKinds = 6;
// The resource's plural name ("pods", "endpointslices", ...).
std::string_view KindName(Kind kind);

class ChurnObjects {
 public:
  struct Naming {
    std::string namespace_;
    std::string prefix;     // <prefix>-pod-N, <prefix>-svc-N; pods' label app=kf-<prefix>.
    std::string manager;    // The EndpointSlices' endpointslice.kubernetes.io/managed-by.
    int address_octet = 0;  // EndpointSlice addresses start at 10.<address_octet>.0.0.
  };

  explicit ChurnObjects(Naming naming) : naming_(std::move(naming)) {}

  const std::string& namespace_() const { return naming_.namespace_; }
  static std::string NodeName(int64_t i);
  std::string PodName(int64_t i) const;
  std::string ServiceName(int64_t i) const;
  std::string SliceName(int64_t i) const;
  static std::string ConfigMapName(int64_t i);

  // Where objects of `kind` are created (POST) and listed; kind's objects live in the namespace,
  // except Nodes.
  std::string Collection(Kind kind) const;
  // The object `object` of `kind` (for a PATCH); for Events, their collection.
  std::string Target(Kind kind, uint32_t object) const;

  static std::string NodeJson(int n);
  // `configmap_volumes`: mounts ConfigMaps lcm-0..N-1.
  std::string PodJson(int i, int node, int configmap_volumes = 0) const;
  std::string ServiceJson(int i) const;
  // Endpoints on random nodes, drawn from `rng`.
  std::string SliceJson(int i, int endpoints, int nodes, std::mt19937& rng) const;
  std::string ConfigMapJson(int i) const;
  // A Normal Event about pod `pod`, stamped with the write time.
  std::string EventJson(const std::string& name, int pod) const;

 private:
  const Naming naming_;
};

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_CHURN_OBJECTS_H_
