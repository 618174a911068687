// LoadChurn: the load test's writes, always straight to the apiserver (never through
// kube-fanout).
//
// Setup() makes the scenario's objects, idempotently (what exists is kept, and found with one
// LIST per kind): the namespace and its default ServiceAccount (the rig has no
// controller-manager to make it), Nodes node-0..node-N-1, pods bound to random nodes, Services
// with one EndpointSlice each, and the configmaps lcm-0..lcm-K-1 the kubelets watch.
//
// Start() then writes at fixed rates (open loop: each write has its slot) until Stop(): merge
// patches of a random pod, Node, EndpointSlice (and configmap, if asked), each stamping the
// write-time annotation the agents read, and POSTs of core/v1 Events, which nobody watches:
// they are write load. Every successful write is recorded with the resourceVersion the apiserver
// answered, for the completeness check.
//
// Writers are threads with one keep-alive connection each (bench::ApiClient). Start and Stop
// from one thread; GetStats after Stop.
#ifndef KUBE_FANOUT_TESTS_LOAD_LOAD_CHURN_H_
#define KUBE_FANOUT_TESTS_LOAD_LOAD_CHURN_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/bench/api_client.h"
#include "tests/bench/latency_histogram.h"
#include "tests/load/completeness.h"

namespace kf::load {

class LoadChurn {
 public:
  struct Options {
    std::string namespace_ = "kf-load";
    int nodes = 100;  // One per kubelet.
    int pods_per_node = 2;
    int services = 30;  // Each with one EndpointSlice.
    int endpoints_per_slice = 10;
    int configmaps = 2;
    std::array<double, kKinds> rates{};  // Writes per second, by Kind (services: unused).
    int setup_connections = 8;
    uint32_t seed = 1;
  };

  LoadChurn(bench::Endpoint apiserver, std::string token, Options options);
  ~LoadChurn();
  LoadChurn(const LoadChurn&) = delete;
  LoadChurn& operator=(const LoadChurn&) = delete;

  absl::Status Setup();
  int pods() const { return options_.nodes * options_.pods_per_node; }
  // The node (index) pod i is bound to, as found or made by Setup; -1 when not node-<index>.
  int32_t PodNode(uint32_t pod) const { return pod < pod_nodes_.size() ? pod_nodes_[pod] : -1; }

  void Start();
  void Stop();
  uint64_t writes_so_far() const { return writes_so_far_.load(std::memory_order_relaxed); }

  struct Stats {
    std::array<uint64_t, kKinds> writes{};  // Successful, by Kind.
    uint64_t failed = 0;
    uint64_t late = 0;  // Slots skipped because the writer was more than a period behind.
    double elapsed = 0;
    bench::LatencyHistogram write_latency;
    std::vector<std::string> failure_samples;
    std::vector<Write> log;
  };
  Stats GetStats() const;

 private:
  struct Writer;
  void RunWriter(Writer& w);
  std::string Target(Kind kind, uint32_t object) const;

  const bench::Endpoint apiserver_;
  const std::string token_;
  const Options options_;
  const int64_t run_id_;  // Names this run's Events apart from earlier runs'.
  std::vector<int32_t> pod_nodes_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> writes_so_far_{0};
  std::vector<std::unique_ptr<Writer>> writers_;
  std::chrono::steady_clock::time_point started_, stopped_;
};

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_LOAD_CHURN_H_
