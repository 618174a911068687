// BenchRun: one run of the fan-out benchmark, phase by phase:
//   setup → wait for kube-fanout's caches → ramp watchers → settle → churn → drain → close,
// sampling kube-fanout (/proc and /metrics), the apiserver (/metrics) and the machine at each
// boundary into a RunRecord, which Summarize() turns into the report. Every phase has a bound.
//
// Runs on the calling thread; owns the WatchClient and Churn threads while it runs.
#ifndef KUBE_FANOUT_TESTS_BENCH_BENCH_RUN_H_
#define KUBE_FANOUT_TESTS_BENCH_BENCH_RUN_H_

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/bench/bench_report.h"
#include "tests/bench/proc_stats.h"
#include "tests/bench/watch_client.h"
#include "tests/tools/api_client.h"
#include "tests/tools/churn.h"
#include "tests/tools/latency_histogram.h"

namespace kf::bench {

// The benchmark's objects and writes: its own names ("bench-pod-N", ...) and namespace, pods and
// EndpointSlices (no Services or ConfigMaps), created without a LIST first, a fixed number of
// writers per kind. The flags set the sizes and rates.
inline tools::Churn::Options BenchChurnOptions() {
  tools::Churn::Options o;
  o.namespace_ = "kf-bench";
  o.prefix = "bench";
  o.manager = "kf-fanout-bench";
  o.address_octet = 64;
  o.nodes = 1000;
  o.pods = 2000;
  o.slices = 50;
  o.services = false;
  o.configmaps = 0;
  o.keep_existing = false;
  o.rate(tools::Kind::kPods) = 20;
  o.rate(tools::Kind::kEndpointSlices) = 10;
  o.writers_per_kind = 2;
  return o;
}

struct BenchFlags {
  std::string mode = "run";
  std::string proxy, apiserver, ca_file, token_env = "KF_ADMIN_TOKEN";
  int kube_fanout_pid = 0;
  std::vector<std::string> pids;  // NAME=PID
  int watchers = 10000;
  double ramp_rate = 500;
  int client_threads = 1;
  std::string wire = "json";       // Or "protobuf": what the watchers ask for.
  int streams_per_connection = 0;  // 0: HTTP/1.1; N: HTTP/2 (h2c), N watchers a connection.
  // kube-fanout's TLS listener (IP:PORT): the watchers connect there over TLS.
  std::string tls_proxy;
  int source_ips = 0;  // 0: enough for the connections (one per 25,000); N: 127.0.0.1..N.
  int duration = 60;
  // Seconds kube-fanout is stopped (SIGSTOP, then SIGCONT) halfway through the churn: the
  // backlog it finds on waking, its windows and sockets full, is where lost wake-ups showed.
  int stop_kube_fanout = 0;
  // The churn's second at which that stop starts.
  int stop_kube_fanout_at() const { return std::max(1, duration / 2); }
  // Seconds to wait after the watchers' RSS sample, before the churn: time to look at an idle
  // kube-fanout with all its watchers (heap profilers, malloc statistics).
  int hold_before_churn = 0;
  int settle_max = 120;
  int sample_interval = 5;
  std::string watch_order = "shuffled";  // Or "alternate".
  int max_runtime = 0;
  bool skip_setup = false;
  std::string baseline;  // pods=N,endpointslices=M
  tools::Churn::Options churn = BenchChurnOptions();
  bool help = false;
};

// Everything sampled at a phase boundary.
struct Snapshot {
  std::chrono::steady_clock::time_point at;
  std::optional<ProcSample> kube_fanout;
  std::vector<ThreadCpu> kube_fanout_threads;
  std::map<std::string, std::optional<ProcSample>> others;
  double self_cpu = 0;
  MachineCpu machine;
  std::string kf_metrics, api_metrics;  // Empty when not scraped.
};

// One point of the churn's timeline: where the events are (written, received upstream by
// kube-fanout, queued to watchers, in the kernel, received by the watchers) and who used the CPU.
struct TimelinePoint {
  Snapshot snapshot;  // /proc only, plus kube-fanout's /metrics.
  uint64_t pod_writes = 0, slice_writes = 0;
  uint64_t delivered = 0;
  SocketQueues sockets;
  uint64_t tcp_memory = 0;
};

struct RunRecord {
  BenchFlags flags;
  std::optional<double> baseline_pod_watches, baseline_slice_watches;
  double setup_seconds = 0, ramp_seconds = 0, settle_seconds = 0, drain_seconds = 0;
  Snapshot before_idle, idle, ramped, churn_start, churn_end, closed;
  std::vector<TimelinePoint> timeline;  // From the churn's start to the end of the drain.
  WatchClient::Totals at_ramped, at_churn_start, at_churn_end;
  tools::Churn::Stats churn;
  uint64_t expected_pod_events = 0, expected_slice_events = 0;
  tools::LatencyHistogram latency, pod_latency, slice_latency;
  WatchPlan plan;
  std::vector<WatchClient::PerWatch> per_watch;
  std::vector<std::string> watch_failures;
  std::vector<std::string> problems;
};

class BenchRun {
 public:
  BenchRun(BenchFlags flags, tools::Endpoint apiserver, tools::Endpoint proxy, std::string token);
  // 0 when the run completed (its findings are in the record), 1 when it could not.
  int Run();
  const RunRecord& record() const { return r_; }

 private:
  Snapshot Take(bool kf_metrics, bool api_metrics);
  TimelinePoint Sample(const WatchClient& watchers, const tools::Churn& churn);
  std::string Scrape(tools::ApiClient& client);
  bool WaitForCaches();
  bool Ramp(WatchClient& watchers);
  void Settle(WatchClient& watchers);
  void RunChurn(WatchClient& watchers, tools::Churn& churn);
  void Drain(WatchClient& watchers, const tools::Churn& churn, uint64_t expected);
  void WaitForWatchersGone();
  void ComputeExpected();

  const tools::Endpoint api_endpoint_, proxy_endpoint_;
  const std::string token_;
  tools::ApiClient api_, kf_;
  std::map<std::string, pid_t> others_;
  uint16_t proxy_port_ = 0;
  RunRecord r_;
};

// The apiserver's open WATCH requests for `resource` (apiserver_longrunning_requests), -1 when
// the metric is missing; kube-fanout's per-resource metric `name`, -1 when missing.
double ApiserverWatches(const std::string& metrics, const char* resource);
double KubeFanoutMetric(const std::string& metrics, const char* name, const char* resource);
inline constexpr const char* kKfSlices = "endpointslices.discovery.k8s.io";

BenchReport Summarize(const RunRecord& r);

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_BENCH_RUN_H_
