// Churn: the upstream writes of the fan-out benchmark and of the load test, always straight to
// the apiserver (never through kube-fanout).
//
// Setup() makes the scenario's objects (see ChurnObjects), idempotently: the namespace and its
// default ServiceAccount (the rig has no controller-manager to make it), Nodes node-0..node-N-1,
// pods bound to random nodes, EndpointSlices (each with its Service, if asked) and ConfigMaps.
// Objects that exist already are kept; with keep_existing, one LIST per kind first finds them
// (and where the existing pods really are), so they are not even POSTed again.
//
// Start() then writes at fixed rates (open loop: each write has its slot, see OpenLoop) until
// Stop(): merge patches of a random object of each kind with a rate, each stamping the write
// time (write_stamp.h) taken just before the request is sent, which the watchers read; and
// POSTs of core/v1 Events, which nobody watches: they are write load. A write counts when the
// apiserver answered with the object and its resourceVersion; each is recorded, for the load
// test's completeness check and the benchmark's expected event counts.
//
// Writers are threads with one keep-alive connection each (ApiClient). Start and Stop from one
// thread; GetStats after Stop; writes_so_far from any thread.
#ifndef KUBE_FANOUT_TESTS_TOOLS_CHURN_H_
#define KUBE_FANOUT_TESTS_TOOLS_CHURN_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/tools/api_client.h"
#include "tests/tools/churn_objects.h"
#include "tests/tools/latency_histogram.h"

namespace kf::tools {

// One successful churn write: the object (an index among those of its kind; for Events, the
// writer's sequence number) and the resourceVersion the apiserver answered with.
struct Write {
  Kind kind;
  uint32_t object;
  uint64_t rv;
};

class Churn {
 public:
  struct Options {
    std::string namespace_ = "kf-load";
    std::string prefix = "load";      // Object names and labels (ChurnObjects::Naming).
    std::string manager = "kf-load";  // The EndpointSlices' managed-by label.
    int address_octet = 128;          // EndpointSlice addresses from 10.<octet>.0.0.
    int nodes = 100;
    int pods = 200;  // Bound to random nodes.
    int slices = 30;
    bool services = true;  // A Service for each EndpointSlice.
    int endpoints_per_slice = 10;
    int configmaps = 2;
    // > 0: every pod mounts ConfigMaps lcm-0..N-1, and the first `nodes` pods go one to each
    // node, so every node's kubelet may read them under the Node authorizer.
    int pod_configmap_volumes = 0;
    bool keep_existing = true;           // LIST first; keep what exists where it is.
    std::array<double, kKinds> rates{};  // Writes per second, by Kind (services: unused).
    int writers_per_kind = 0;            // 0: one per 40 writes/s of the kind, at most 8.
    // The writers of a kind write at the same instants (bursts of writers_per_kind writes, at
    // the same average rate) instead of spread evenly over each period.
    bool bursts = false;
    // Each writer's writes arrive as a Poisson process of its rate (OpenLoop), so the kinds
    // meet only by chance; otherwise evenly spaced, and kinds whose rates divide each other
    // write at the same instants (the default: the figures in docs/ were made so).
    bool poisson = false;
    int setup_connections = 8;
    uint32_t seed = 1;

    double& rate(Kind kind) { return rates[static_cast<size_t>(kind)]; }
    double rate(Kind kind) const { return rates[static_cast<size_t>(kind)]; }
  };

  Churn(Endpoint apiserver, std::string token, Options options);
  ~Churn();
  Churn(const Churn&) = delete;
  Churn& operator=(const Churn&) = delete;

  // Bounded: each request has a deadline and at most three attempts.
  absl::Status Setup();
  int pods() const { return options_.pods; }
  // The node (index) pod i is bound to, as drawn or, with keep_existing, found by Setup; -1 when
  // not node-<index>.
  int32_t PodNode(uint32_t pod) const { return pod < pod_nodes_.size() ? pod_nodes_[pod] : -1; }

  void Start();
  void Stop();
  // Successful writes so far, of all kinds or of one.
  uint64_t writes_so_far() const;
  uint64_t writes_so_far(Kind kind) const {
    return writes_so_far_[static_cast<size_t>(kind)].load(std::memory_order_relaxed);
  }

  struct Stats {
    std::array<uint64_t, kKinds> writes{};  // Successful, by Kind.
    uint64_t failed = 0;                    // Errors and other answers.
    uint64_t late = 0;   // Slots skipped because the writer was more than a period behind.
    double elapsed = 0;  // Seconds from Start to Stop.
    std::vector<uint64_t> pod_writes_per_node;  // Successful pod writes, by the pod's node.
    LatencyHistogram write_latency;             // Request round trip as seen here.
    std::vector<std::string> failure_samples;
    std::vector<Write> log;

    uint64_t writes_of(Kind kind) const { return writes[static_cast<size_t>(kind)]; }
  };
  Stats GetStats() const;

 private:
  struct Writer;
  void RunWriter(Writer& w);
  uint32_t Objects(Kind kind) const;

  const Endpoint apiserver_;
  const std::string token_;
  const Options options_;
  const ChurnObjects objects_;
  const int64_t run_id_;  // Names this run's Events apart from earlier runs'.
  std::vector<int32_t> pod_nodes_;
  std::atomic<bool> stop_{false};
  std::array<std::atomic<uint64_t>, kKinds> writes_so_far_{};
  std::vector<std::unique_ptr<Writer>> writers_;
  std::chrono::steady_clock::time_point started_, stopped_;
};

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_CHURN_H_
