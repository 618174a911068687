// Churn: the benchmark's upstream changes. Setup() creates, directly on the apiserver, a
// namespace with its default ServiceAccount, nodes node-0..node-K-1, pods bound to random nodes
// and EndpointSlices; Start() then patches random pods and random EndpointSlices at fixed rates
// (open loop: each write has a scheduled time), stamping each with the wall-clock time taken
// just before the request is sent, in the annotation the watchers read.
//
// Owns its writer threads, each with its own keep-alive connection (ApiClient). Start and Stop
// from one thread; GetStats after Stop.
#ifndef KUBE_FANOUT_TESTS_BENCH_CHURN_H_
#define KUBE_FANOUT_TESTS_BENCH_CHURN_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tests/bench/api_client.h"
#include "tests/bench/latency_histogram.h"

namespace kf::bench {

class Churn {
 public:
  struct Options {
    std::string namespace_ = "kf-bench";
    int nodes = 1000;
    int pods = 2000;
    int slices = 50;
    int endpoints_per_slice = 10;
    double pod_rate = 20;    // Writes per second.
    double slice_rate = 10;  // Writes per second.
    int writers_per_kind = 2;
    int setup_connections = 8;
    uint32_t seed = 1;
  };

  Churn(Endpoint apiserver, std::string token, Options options);
  ~Churn();

  // Creates everything (objects that already exist are kept). Bounded: each request has a
  // deadline and at most three attempts.
  absl::Status Setup();
  const std::vector<int>& pod_nodes() const { return pod_nodes_; }

  void Start();
  void Stop();
  // Successful writes of pods (or EndpointSlices) so far; any thread, while running.
  uint64_t writes_so_far(bool pods) const {
    return (pods ? pod_writes_so_far_ : slice_writes_so_far_).load(std::memory_order_relaxed);
  }

  struct Stats {
    uint64_t pod_writes = 0, slice_writes = 0;  // Successful (HTTP 200).
    uint64_t failed = 0;                        // Errors and non-200 answers.
    uint64_t late = 0;   // Writes sent more than one period after their slot.
    double elapsed = 0;  // Seconds from Start to Stop.
    std::vector<uint64_t> pod_writes_per_node;
    LatencyHistogram write_latency;  // Request round trip as seen here.
    std::vector<std::string> failure_samples;
  };
  Stats GetStats() const;

 private:
  struct Writer;
  void RunWriter(Writer& w);

  const Endpoint apiserver_;
  const std::string token_;
  const Options options_;
  std::vector<int> pod_nodes_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> pod_writes_so_far_{0}, slice_writes_so_far_{0};
  std::vector<std::unique_ptr<Writer>> writers_;
  std::chrono::steady_clock::time_point started_, stopped_;
};

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_CHURN_H_
