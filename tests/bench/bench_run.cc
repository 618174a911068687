#include "tests/bench/bench_run.h"

#include <boost/asio/ip/address.hpp>
#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "tests/tools/write_stamp.h"

namespace kf::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

void Log(const std::string& line) { std::fprintf(stderr, "kf_fanout_bench: %s\n", line.c_str()); }

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

unsigned long U(uint64_t v) { return static_cast<unsigned long>(v); }

}  // namespace

double ApiserverWatches(const std::string& metrics, const char* resource) {
  return MetricSum(metrics, "apiserver_longrunning_requests",
                   {"verb=\"WATCH\"", absl::StrCat("resource=\"", resource, "\"")})
      .value_or(-1);
}

double KubeFanoutMetric(const std::string& metrics, const char* name, const char* resource) {
  return MetricSum(metrics, name, {absl::StrCat("resource=\"", resource, "\"")}).value_or(-1);
}

BenchRun::BenchRun(BenchFlags flags, tools::Endpoint apiserver, tools::Endpoint proxy,
                   std::string token)
    : api_endpoint_(std::move(apiserver)),
      proxy_endpoint_(std::move(proxy)),
      token_(std::move(token)),
      api_(api_endpoint_, token_),
      kf_(proxy_endpoint_, token_) {
  r_.flags = std::move(flags);
  for (const std::string& p : r_.flags.pids) {
    std::vector<std::string> kv = absl::StrSplit(ToAbsl(p), absl::MaxSplits('=', 1));
    int pid = 0;
    if (kv.size() == 2 && absl::SimpleAtoi(kv[1], &pid)) others_[kv[0]] = pid;
  }
  for (absl::string_view part : absl::StrSplit(ToAbsl(r_.flags.baseline), ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    double v = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &v)) continue;
    if (kv[0] == "pods") r_.baseline_pod_watches = v;
    if (kv[0] == "endpointslices") r_.baseline_slice_watches = v;
  }
}

std::string BenchRun::Scrape(tools::ApiClient& client) {
  auto res = client.Get("/metrics");
  return res.ok() && res->status == 200 ? std::move(res->body) : std::string();
}

Snapshot BenchRun::Take(bool kf_metrics, bool api_metrics) {
  Snapshot s;
  s.at = Clock::now();
  if (r_.flags.kube_fanout_pid > 0) {
    s.kube_fanout = ReadProc(r_.flags.kube_fanout_pid);
    s.kube_fanout_threads = ReadThreads(r_.flags.kube_fanout_pid);
  }
  for (const auto& [name, pid] : others_) s.others[name] = ReadProc(pid);
  s.self_cpu = SelfCpuSeconds();
  s.machine = ReadMachineCpu();
  if (kf_metrics) s.kf_metrics = Scrape(kf_);
  if (api_metrics) s.api_metrics = Scrape(api_);
  return s;
}

TimelinePoint BenchRun::Sample(const WatchClient& watchers, const tools::Churn& churn) {
  TimelinePoint p;
  p.snapshot = Take(true, false);
  p.pod_writes = churn.writes_so_far(tools::Kind::kPods);
  p.slice_writes = churn.writes_so_far(tools::Kind::kEndpointSlices);
  p.delivered = watchers.GetTotals().measured();
  int upstream_port = 0;
  (void)absl::SimpleAtoi(api_endpoint_.port, &upstream_port);
  p.sockets = ReadSocketQueues(proxy_port_, static_cast<uint16_t>(upstream_port));
  p.tcp_memory = ReadTcpMemoryBytes();
  return p;
}

bool BenchRun::WaitForCaches() {
  const auto deadline = Clock::now() + seconds(120);
  while (Clock::now() < deadline) {
    const std::string m = Scrape(kf_);
    if (KubeFanoutMetric(m, "kube_fanout_cache_synced", "pods") == 1 &&
        KubeFanoutMetric(m, "kube_fanout_cache_synced", kKfSlices) == 1 &&
        KubeFanoutMetric(m, "kube_fanout_cache_objects", "pods") >= r_.flags.churn.pods &&
        KubeFanoutMetric(m, "kube_fanout_cache_objects", kKfSlices) >= r_.flags.churn.slices) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return false;
}

bool BenchRun::Ramp(WatchClient& watchers) {
  const int n = r_.flags.watchers;
  const auto start = Clock::now();
  auto next_log = start + seconds(5);
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_until(start +
                                  std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(i / r_.flags.ramp_rate)));
    watchers.Open(i);
    if (Clock::now() >= next_log) {
      const auto t = watchers.GetTotals();
      Log(Fmt("ramp: %d opened, %lu connected, %lu failed", i + 1, U(t.connected), U(t.failed)));
      next_log += seconds(5);
    }
  }
  // Every watcher has its 200 and headers, or failed; bounded.
  const auto deadline = Clock::now() + seconds(60);
  WatchClient::Totals t = watchers.GetTotals();
  while (Clock::now() < deadline && t.connected + t.failed < static_cast<uint64_t>(n)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t = watchers.GetTotals();
  }
  r_.ramp_seconds = Since(start);
  Log(Fmt("ramp: %lu of %d watchers connected in %.1fs, %lu failed", U(t.connected), n,
          r_.ramp_seconds, U(t.failed)));
  if (t.connected + t.failed < static_cast<uint64_t>(n)) {
    r_.problems.push_back(
        Fmt("%lu watchers had no answer 60s after the ramp", U(n - t.connected - t.failed)));
  }
  return t.connected > 0;
}

void BenchRun::Settle(WatchClient& watchers) {
  // The initial state (one ADDED per matching object) streams out during the ramp; wait until
  // the bytes stop for 2s.
  const auto start = Clock::now();
  const auto deadline = start + seconds(r_.flags.settle_max);
  uint64_t last = watchers.GetTotals().bytes;
  auto quiet_since = Clock::now();
  while (Clock::now() < deadline && Clock::now() - quiet_since < seconds(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const uint64_t now = watchers.GetTotals().bytes;
    if (now != last) {
      last = now;
      quiet_since = Clock::now();
    }
  }
  r_.settle_seconds = Since(start);
  if (Clock::now() >= deadline) {
    r_.problems.push_back("initial events were still flowing at the end of --settle-max");
  }
}

void BenchRun::ComputeExpected() {
  // Each successful write becomes exactly one event on every watcher that selects the object.
  std::vector<uint64_t> per_node(static_cast<size_t>(r_.flags.churn.nodes), 0);
  uint64_t slice_watchers = 0;
  for (size_t i = 0; i < r_.plan.size(); ++i) {
    if (r_.plan.pods(i)) {
      ++per_node[static_cast<size_t>(r_.plan.node[i])];
    } else {
      ++slice_watchers;
    }
  }
  r_.expected_pod_events = 0;
  for (size_t n = 0; n < per_node.size() && n < r_.churn.pod_writes_per_node.size(); ++n) {
    r_.expected_pod_events += per_node[n] * r_.churn.pod_writes_per_node[n];
  }
  r_.expected_slice_events = slice_watchers * r_.churn.writes_of(tools::Kind::kEndpointSlices);
}

void BenchRun::RunChurn(WatchClient& watchers, tools::Churn& churn) {
  watchers.MeasureFrom(tools::UnixNanos());
  r_.at_churn_start = watchers.GetTotals();
  r_.churn_start = Take(true, false);
  r_.timeline.push_back(Sample(watchers, churn));
  churn.Start();
  Log(Fmt("churn: started, %d s", r_.flags.duration));
  const auto start = Clock::now();
  const int every = std::max(1, r_.flags.sample_interval);
  for (int s = 1; s <= r_.flags.duration; ++s) {
    std::this_thread::sleep_until(start + seconds(s));
    if (s == r_.flags.stop_kube_fanout_at() && r_.flags.stop_kube_fanout > 0 &&
        r_.flags.kube_fanout_pid > 0) {
      Log(Fmt("churn: kube-fanout stopped for %d s", r_.flags.stop_kube_fanout));
      kill(r_.flags.kube_fanout_pid, SIGSTOP);
      std::this_thread::sleep_for(seconds(r_.flags.stop_kube_fanout));
      kill(r_.flags.kube_fanout_pid, SIGCONT);
    }
    if (s % every == 0 && s < r_.flags.duration) r_.timeline.push_back(Sample(watchers, churn));
    if (s % 10 == 0 || s == r_.flags.duration) {
      const auto t = watchers.GetTotals();
      Log(Fmt("churn: %d/%ds, %lu events delivered, %lu watchers ended", s, r_.flags.duration,
              U(t.measured()), U(t.ended)));
    }
  }
  churn.Stop();
  r_.churn = churn.GetStats();
  ComputeExpected();
  const uint64_t expected = r_.expected_pod_events + r_.expected_slice_events;
  Drain(watchers, churn, expected);
  r_.churn_end = Take(true, true);
  r_.timeline.push_back(Sample(watchers, churn));
  r_.at_churn_end = watchers.GetTotals();
  const uint64_t got = r_.at_churn_end.measured();
  if (got < expected) {
    r_.problems.push_back(Fmt("%lu of %lu expected events never arrived (%lu watchers ended)",
                              U(expected - got), U(expected), U(r_.at_churn_end.ended)));
  }
}

void BenchRun::Drain(WatchClient& watchers, const tools::Churn& churn, uint64_t expected) {
  // Events in flight when the writes stop: wait until all arrived, or nothing moved for 3s.
  const auto start = Clock::now();
  auto next_sample = start + seconds(std::max(1, r_.flags.sample_interval));
  const auto deadline = start + seconds(30);
  uint64_t last = watchers.GetTotals().measured();
  auto quiet_since = Clock::now();
  while (Clock::now() < deadline && last < expected && Clock::now() - quiet_since < seconds(3)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (Clock::now() >= next_sample) {
      r_.timeline.push_back(Sample(watchers, churn));
      next_sample += seconds(std::max(1, r_.flags.sample_interval));
    }
    const uint64_t now = watchers.GetTotals().measured();
    if (now != last) {
      last = now;
      quiet_since = Clock::now();
    }
  }
  r_.drain_seconds = Since(start);
}

void BenchRun::WaitForWatchersGone() {
  const auto deadline = Clock::now() + seconds(20);
  while (Clock::now() < deadline) {
    const std::string m = Scrape(kf_);
    if (KubeFanoutMetric(m, "kube_fanout_watchers", "pods") == 0 &&
        KubeFanoutMetric(m, "kube_fanout_watchers", kKfSlices) == 0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  r_.problems.push_back(
      "kube_fanout_watchers did not return to 0 within 20s of closing the watchers");
}

int BenchRun::Run() {
  const BenchFlags& f = r_.flags;
  tools::Churn churn(api_endpoint_, token_, f.churn);
  if (!f.skip_setup) {
    const auto start = Clock::now();
    Log(Fmt("setup: namespace %s, %d nodes, %d pods, %d EndpointSlices", f.churn.namespace_.c_str(),
            f.churn.nodes, f.churn.pods, f.churn.slices));
    if (auto s = churn.Setup(); !s.ok()) {
      Log("setup failed: " + std::string(s.message()));
      return 1;
    }
    r_.setup_seconds = Since(start);
  }
  if (!WaitForCaches()) {
    Log("kube-fanout's pods and endpointslices caches did not hold every object within 120s");
    return 1;
  }
  r_.before_idle = Take(false, false);
  std::this_thread::sleep_for(seconds(3));
  r_.idle = Take(true, true);

  WatchClient::Options wo;
  boost::system::error_code ec;
  int port = 0;
  // The watchers' listener: the plain one, or the TLS one.
  auto watched = f.tls_proxy.empty() ? absl::StatusOr<tools::Endpoint>(proxy_endpoint_)
                                     : tools::Endpoint::Parse(f.tls_proxy);
  const auto address =
      watched.ok() ? asio::ip::make_address(watched->host, ec) : asio::ip::address();
  if (!watched.ok() || ec || !absl::SimpleAtoi(watched->port, &port) || port <= 0 || port > 65535) {
    Log("--proxy and --tls-proxy must be an IP address and port");
    return 1;
  }
  proxy_port_ = static_cast<uint16_t>(port);
  wo.proxy = asio::ip::tcp::endpoint(address, proxy_port_);
  wo.token = token_;
  r_.plan = WatchPlan::Make(f.watchers, f.churn.nodes, f.watch_order != "alternate", f.churn.seed);
  wo.plan = r_.plan;
  wo.threads = f.client_threads;
  wo.protobuf = f.wire == "protobuf";
  wo.streams_per_connection = f.streams_per_connection;
  wo.tls = !f.tls_proxy.empty();
  wo.ca_file = f.ca_file;
  {
    const int connections =
        f.streams_per_connection > 0
            ? (f.watchers + f.streams_per_connection - 1) / f.streams_per_connection
            : f.watchers;
    wo.source_ips = f.source_ips > 0 ? f.source_ips : connections / 25000 + 1;
  }
  WatchClient watchers(wo);
  if (!watchers.setup_error().empty()) {
    Log(watchers.setup_error());
    return 1;
  }
  watchers.Start();
  const bool any = Ramp(watchers);
  if (any) Settle(watchers);
  r_.at_ramped = watchers.GetTotals();
  r_.ramped = Take(true, true);
  if (any) {
    if (f.hold_before_churn > 0) {
      Log(Fmt("holding %d s before the churn", f.hold_before_churn));
      std::this_thread::sleep_for(seconds(f.hold_before_churn));
    }
    RunChurn(watchers, churn);
  } else {
    r_.problems.push_back("no watcher connected; no churn");
    r_.churn_start = r_.churn_end = r_.ramped;
    r_.at_churn_start = r_.at_churn_end = r_.at_ramped;
  }
  Log("closing the watchers");
  watchers.CloseAll();
  watchers.Join(seconds(15));
  r_.latency = watchers.Latencies();
  r_.pod_latency = watchers.Latencies(true);
  r_.slice_latency = watchers.Latencies(false);
  r_.per_watch = watchers.PerWatchResults(f.watchers);
  r_.watch_failures = watchers.FailureSamples();
  WaitForWatchersGone();
  std::this_thread::sleep_for(seconds(2));
  r_.closed = Take(true, true);
  return 0;
}

}  // namespace kf::bench
