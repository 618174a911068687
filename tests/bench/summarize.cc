// Summarize: turns a RunRecord into the report table (see docs/benchmarks.md for what each row
// means and how it is measured).
#include <sys/utsname.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/bench/bench_run.h"

namespace kf::bench {
namespace {

unsigned long U(uint64_t v) { return static_cast<unsigned long>(v); }
double Mib(uint64_t kib) { return static_cast<double>(kib) / 1024.0; }
double Ms(uint64_t us) { return static_cast<double>(us) / 1000.0; }
double Seconds(const Snapshot& a, const Snapshot& b) {
  return std::chrono::duration<double>(b.at - a.at).count();
}
std::string Count(double v) { return v < 0 ? "n/a" : Fmt("%.0f", v); }

double KfDelta(const Snapshot& a, const Snapshot& b, const char* name, const char* resource) {
  const double x = KubeFanoutMetric(a.kf_metrics, name, resource);
  const double y = KubeFanoutMetric(b.kf_metrics, name, resource);
  return x < 0 || y < 0 ? -1 : y - x;
}

// Watch writes during the churn and its drain, both paths (the direct one from the wake-up and
// the watch loop's): each is one gathered write of all that a watcher had queued. -1: unknown.
double WatchWrites(const RunRecord& r) {
  const auto sum = [](const Snapshot& s) {
    return MetricSum(s.kf_metrics, "kube_fanout_watch_writes_total", {}).value_or(-1);
  };
  const double a = sum(r.churn_start), b = sum(r.churn_end);
  return a < 0 || b < 0 ? -1 : b - a;
}

double Route(const Snapshot& s, const char* route) {
  return MetricSum(s.kf_metrics, "kube_fanout_requests_total", {Fmt("route=\"%s\"", route)})
      .value_or(-1);
}

// CPU seconds between two snapshots: kube-fanout, this process, the named others, and whatever
// else ran on the machine.
struct CpuSplit {
  double kube_fanout = 0, client = 0, named = 0, rest = 0, machine = 0, wall = 0;
};
CpuSplit Split(const Snapshot& a, const Snapshot& b) {
  CpuSplit c;
  c.wall = std::max(Seconds(a, b), 1e-9);
  if (a.kube_fanout && b.kube_fanout)
    c.kube_fanout = b.kube_fanout->cpu_seconds - a.kube_fanout->cpu_seconds;
  c.client = b.self_cpu - a.self_cpu;
  for (const auto& [name, start] : a.others) {
    auto it = b.others.find(name);
    if (start && it != b.others.end() && it->second)
      c.named += it->second->cpu_seconds - start->cpu_seconds;
  }
  c.machine = b.machine.busy - a.machine.busy;
  c.rest = std::max(0.0, c.machine - c.kube_fanout - c.client - c.named);
  return c;
}

double Pct(double cpu, double wall) { return 100 * cpu / wall; }

void SetupRows(const RunRecord& r, BenchReport& out) {
  const BenchFlags& f = r.flags;
  utsname u{};
  uname(&u);
  const int pod_watchers = (f.watchers + 1) / 2;
  out.Section("Setup");
  out.Row("machine",
          Fmt("%u CPUs (nproc), kernel %s", std::thread::hardware_concurrency(), u.release));
  out.Row(
      "objects",
      Fmt("%d nodes, %d pods on random nodes, %d EndpointSlices x %d endpoints (created in %.1fs)",
          f.churn.nodes, f.churn.pods, f.churn.slices, f.churn.endpoints_per_slice,
          r.setup_seconds));
  out.Row("watchers requested",
          Fmt("%d: %d pods-by-node (%.1f per node), %d all-EndpointSlices, connecting in %s order; "
              "%.0f/s ramp, %d client thread(s); wire %s over %s",
              f.watchers, pod_watchers, static_cast<double>(pod_watchers) / f.churn.nodes,
              f.watchers - pod_watchers, f.watch_order.c_str(), f.ramp_rate, f.client_threads,
              f.wire.c_str(),
              absl::StrCat(
                  f.streams_per_connection > 0
                      ? absl::StrCat("HTTP/2 (", f.streams_per_connection, " watches a connection)")
                      : "HTTP/1.1",
                  f.tls_proxy.empty() ? "" : " and TLS")
                  .c_str()));
  out.Row("churn", Fmt("%d s at %.0f pod + %.0f EndpointSlice writes/s (merge patches, %d writer "
                       "connections each, %s)",
                       f.duration, f.churn.rate(tools::Kind::kPods),
                       f.churn.rate(tools::Kind::kEndpointSlices), f.churn.writers_per_kind,
                       f.churn.bursts ? "writing in bursts" : "spread evenly"));
  if (f.stop_kube_fanout > 0) {
    out.Row("kube-fanout stopped", Fmt("%d s (SIGSTOP, then SIGCONT) at %d s into the churn",
                                       f.stop_kube_fanout, f.stop_kube_fanout_at()));
  }
}

void WatcherRows(const RunRecord& r, BenchReport& out) {
  const auto& t = r.at_churn_end;
  out.Section("Watchers");
  out.Row("connected / failed / ended during the run",
          Fmt("%lu / %lu / %lu", U(t.connected), U(t.failed), U(t.ended)));
  out.Row("ramp, then initial events settled",
          Fmt("%.1f s, then %.1f s", r.ramp_seconds, r.settle_seconds));
  out.Row("initial events received (state at watch start)",
          Fmt("%lu (%.1f MiB in all)", U(r.at_ramped.initial),
              static_cast<double>(r.at_ramped.bytes) / 1048576.0));
  out.Row("kube_fanout_watchers pods / endpointslices (ramped)",
          Count(KubeFanoutMetric(r.ramped.kf_metrics, "kube_fanout_watchers", "pods")) + " / " +
              Count(KubeFanoutMetric(r.ramped.kf_metrics, "kube_fanout_watchers", kKfSlices)));
  out.Row("kube_fanout_watchers after the watchers closed",
          Count(KubeFanoutMetric(r.closed.kf_metrics, "kube_fanout_watchers", "pods")) + " / " +
              Count(KubeFanoutMetric(r.closed.kf_metrics, "kube_fanout_watchers", kKfSlices)));
}

void UpstreamRows(const RunRecord& r, BenchReport& out) {
  out.Section("Upstream: one watch per resource");
  for (const auto& [label, api, kf, baseline] :
       {std::tuple{"pods", "pods", "pods", r.baseline_pod_watches},
        std::tuple{"endpointslices", "endpointslices", kKfSlices, r.baseline_slice_watches}}) {
    const std::string base = baseline ? Fmt("%.0f", *baseline) : "n/a";
    out.Row(
        Fmt("apiserver open WATCH %s: no kube-fanout / idle / N watchers / after churn / closed",
            label),
        Fmt("%s / %s / %s / %s / %s", base.c_str(),
            Count(ApiserverWatches(r.idle.api_metrics, api)).c_str(),
            Count(ApiserverWatches(r.ramped.api_metrics, api)).c_str(),
            Count(ApiserverWatches(r.churn_end.api_metrics, api)).c_str(),
            Count(ApiserverWatches(r.closed.api_metrics, api)).c_str()));
    out.Row(
        Fmt("kube_fanout_upstream_watches_total %s: idle → end", label),
        Count(KubeFanoutMetric(r.idle.kf_metrics, "kube_fanout_upstream_watches_total", kf)) +
            " → " +
            Count(KubeFanoutMetric(r.closed.kf_metrics, "kube_fanout_upstream_watches_total", kf)));
    if (baseline) {
      const double with = ApiserverWatches(r.ramped.api_metrics, api);
      out.Row(Fmt("**upstream WATCH %s added by kube-fanout with N watchers**", label),
              with < 0 ? "n/a" : Fmt("**%.0f**", with - *baseline));
    }
  }
  out.Row("requests kube-fanout passed through during the run (route=passthrough)",
          Count(Route(r.closed, "passthrough") - Route(r.idle, "passthrough")));
}

void ChurnRows(const RunRecord& r, BenchReport& out) {
  const tools::Churn::Stats& c = r.churn;
  const uint64_t pod_writes = c.writes_of(tools::Kind::kPods);
  const uint64_t slice_writes = c.writes_of(tools::Kind::kEndpointSlices);
  out.Section("Churn (writes to the apiserver)");
  out.Row("successful writes: pods / EndpointSlices",
          Fmt("%lu (%.1f/s) / %lu (%.1f/s) in %.1f s", U(pod_writes),
              pod_writes / std::max(c.elapsed, 1e-9), U(slice_writes),
              slice_writes / std::max(c.elapsed, 1e-9), c.elapsed));
  out.Row("failed writes / skipped slots (writer behind)",
          Fmt("%lu / %lu", U(c.failed), U(c.late)));
  out.Row("write round trip p50 / p99 / max",
          Fmt("%.1f / %.1f / %.1f ms", Ms(c.write_latency.PercentileMicros(0.5)),
              Ms(c.write_latency.PercentileMicros(0.99)), Ms(c.write_latency.max_us())));
}

void DeliveryRows(const RunRecord& r, BenchReport& out) {
  const auto& t = r.at_churn_end;
  const uint64_t expected = r.expected_pod_events + r.expected_slice_events;
  const double window = Seconds(r.churn_start, r.churn_end);
  out.Section("Delivery (events written during the churn)");
  out.Row("events delivered: all / pods / EndpointSlices",
          Fmt("%lu / %lu / %lu", U(t.measured()), U(t.measured_pods), U(t.measured_slices)));
  out.Row("expected (writes x watchers selecting them)",
          Fmt("%lu / %lu / %lu; difference %+ld", U(expected), U(r.expected_pod_events),
              U(r.expected_slice_events),
              static_cast<long>(t.measured()) - static_cast<long>(expected)));
  // Per watcher: every open EndpointSlice watcher must have seen every slice write.
  uint64_t wrong = 0, lo = UINT64_MAX, hi = 0, slice_watchers = 0;
  for (size_t i = 0; i < r.per_watch.size(); ++i) {
    if (i >= r.plan.size() || r.plan.pods(i) || !r.per_watch[i].connected) continue;
    ++slice_watchers;
    lo = std::min(lo, r.per_watch[i].measured);
    hi = std::max(hi, r.per_watch[i].measured);
    if (r.per_watch[i].measured != r.churn.writes_of(tools::Kind::kEndpointSlices)) ++wrong;
  }
  out.Row(
      "EndpointSlice watchers with a count other than the writes",
      Fmt("%lu of %lu (min %lu, max %lu, writes %lu)", U(wrong), U(slice_watchers),
          U(slice_watchers ? lo : 0), U(hi), U(r.churn.writes_of(tools::Kind::kEndpointSlices))));
  out.Row("delivery rate (churn + drain window)",
          Fmt("%.0f events/s over %.1f s (drain %.1f s)", t.measured() / std::max(window, 1e-9),
              window, r.drain_seconds));
  out.Row(
      "kube_fanout_events_dispatched_total increase",
      Count(KfDelta(r.churn_start, r.churn_end, "kube_fanout_events_dispatched_total", "pods") +
            KfDelta(r.churn_start, r.churn_end, "kube_fanout_events_dispatched_total", kKfSlices)));
  const tools::LatencyHistogram& l = r.latency;
  out.Row("**latency write → receipt p50 / p90 / p99 / p99.9 / max**",
          Fmt("**%.1f / %.1f / %.1f / %.1f / %.1f ms**", Ms(l.PercentileMicros(0.5)),
              Ms(l.PercentileMicros(0.9)), Ms(l.PercentileMicros(0.99)),
              Ms(l.PercentileMicros(0.999)), Ms(l.max_us())));
  for (const auto& [what, h] : {std::pair{"pods-by-node watchers only", &r.pod_latency},
                                std::pair{"EndpointSlice watchers only", &r.slice_latency}}) {
    out.Row(Fmt("latency, %s: p50 / p99 / max", what),
            Fmt("%.1f / %.1f / %.1f ms", Ms(h->PercentileMicros(0.5)),
                Ms(h->PercentileMicros(0.99)), Ms(h->max_us())));
  }
  out.Row("bookmarks / ERROR events / stale stamps received",
          Fmt("%lu / %lu / %lu", U(t.bookmarks), U(t.errors), U(t.stale_stamps)));
  out.Row(
      "kube_fanout_watchers_cut_total pods / endpointslices",
      Count(KubeFanoutMetric(r.churn_end.kf_metrics, "kube_fanout_watchers_cut_total", "pods")) +
          " / " +
          Count(KubeFanoutMetric(r.churn_end.kf_metrics, "kube_fanout_watchers_cut_total",
                                 kKfSlices)));
}

void ResourceRows(const RunRecord& r, BenchReport& out) {
  out.Section("kube-fanout");
  auto rss = [](const Snapshot& s) { return s.kube_fanout ? s.kube_fanout->rss_kib : 0; };
  auto cpu = [](const Snapshot& s) { return s.kube_fanout ? s.kube_fanout->cpu_seconds : 0.0; };
  const uint64_t connected = std::max<uint64_t>(1, r.at_ramped.connected);
  out.Row("RSS: before watchers / with watchers / after churn / after close",
          Fmt("%.1f / %.1f / %.1f / %.1f MiB", Mib(rss(r.idle)), Mib(rss(r.ramped)),
              Mib(rss(r.churn_end)), Mib(rss(r.closed))));
  out.Row("**RSS per watcher**",
          Fmt("**%.1f KiB**",
              (static_cast<double>(rss(r.ramped)) - static_cast<double>(rss(r.idle))) / connected));
  out.Row("threads", Fmt("%d", r.ramped.kube_fanout ? r.ramped.kube_fanout->threads : 0));
  out.Row("CPU during ramp + settle",
          Fmt("%.2f s (%.0f µs per watcher)", cpu(r.ramped) - cpu(r.idle),
              (cpu(r.ramped) - cpu(r.idle)) * 1e6 / connected));
  const double window = Seconds(r.churn_start, r.churn_end);
  const double kf_cpu = cpu(r.churn_end) - cpu(r.churn_start);
  const uint64_t events = std::max<uint64_t>(1, r.at_churn_end.measured());
  out.Row("CPU during churn + drain",
          Fmt("%.2f s = %.0f%% of one core", kf_cpu, 100 * kf_cpu / std::max(window, 1e-9)));
  std::vector<std::pair<double, int>> by_thread;
  for (const ThreadCpu& end : r.churn_end.kube_fanout_threads) {
    double start = 0;
    for (const ThreadCpu& t : r.churn_start.kube_fanout_threads) {
      if (t.tid == end.tid) start = t.cpu_seconds;
    }
    by_thread.emplace_back(end.cpu_seconds - start, end.tid);
  }
  std::sort(by_thread.rbegin(), by_thread.rend());
  std::string threads;
  for (const auto& [used, tid] : by_thread) {
    absl::StrAppend(&threads, threads.empty() ? "" : ", ", Fmt("%.0f%%", Pct(used, window)));
  }
  out.Row("CPU by thread, busiest first (% of one core)", threads);
  out.Row("**CPU per delivered event**", Fmt("**%.2f µs**", kf_cpu * 1e6 / events));
  const double writes = WatchWrites(r);
  out.Row(
      "watch writes (kube_fanout_watch_writes_total increase, bookmarks too) / events per write",
      writes <= 0 ? std::string("n/a")
                  : Fmt("%.0f / %.2f", writes, static_cast<double>(events) / writes));
  out.Row("kube_fanout_watch_queue_bytes after churn",
          Count(KubeFanoutMetric(r.churn_end.kf_metrics, "kube_fanout_watch_queue_bytes", "pods")) +
              " / " +
              Count(KubeFanoutMetric(r.churn_end.kf_metrics, "kube_fanout_watch_queue_bytes",
                                     kKfSlices)));
}

void MachineRows(const RunRecord& r, BenchReport& out) {
  const double window = Seconds(r.churn_start, r.churn_end);
  const uint64_t events = std::max<uint64_t>(1, r.at_churn_end.measured());
  out.Section("The rest of the machine, same window");
  const double self = r.churn_end.self_cpu - r.churn_start.self_cpu;
  out.Row("bench client CPU (watchers + writers)",
          Fmt("%.2f s = %.0f%% of one core (%.2f µs per event)", self,
              100 * self / std::max(window, 1e-9), self * 1e6 / events));
  for (const auto& [name, start] : r.churn_start.others) {
    auto it = r.churn_end.others.find(name);
    if (!start || it == r.churn_end.others.end() || !it->second) continue;
    const double used = it->second->cpu_seconds - start->cpu_seconds;
    out.Row(name + " CPU",
            Fmt("%.2f s = %.0f%% of one core", used, 100 * used / std::max(window, 1e-9)));
  }
  const CpuSplit churn = Split(r.churn_start, r.churn_end);
  out.Row("other processes on the machine (not part of the benchmark)",
          Fmt("%.2f s = %.0f%% of one core", churn.rest, Pct(churn.rest, churn.wall)));
  out.Row("whole machine busy", Fmt("%.0f%% of one core (%u CPUs)", Pct(churn.machine, churn.wall),
                                    std::thread::hardware_concurrency()));
  const CpuSplit idle = Split(r.before_idle, r.idle);
  out.Row(
      "before the watchers (3 s, all idle): other processes / machine busy",
      Fmt("%.0f%% / %.0f%% of one core", Pct(idle.rest, idle.wall), Pct(idle.machine, idle.wall)));
}

double SumBoth(const std::string& metrics, const char* name) {
  const double p = KubeFanoutMetric(metrics, name, "pods");
  const double e = KubeFanoutMetric(metrics, name, kKfSlices);
  return p < 0 || e < 0 ? -1 : p + e;
}

void Timeline(const RunRecord& r, BenchReport& out) {
  if (r.timeline.size() < 2) return;
  const TimelinePoint& first = r.timeline.front();
  auto metric = [](const TimelinePoint& p, const char* name, const char* resource) {
    return KubeFanoutMetric(p.snapshot.kf_metrics, name, resource);
  };
  constexpr const char* kUp = "kube_fanout_upstream_events_total";
  const double up_pods0 = metric(first, kUp, "pods");
  const double up_slices0 = metric(first, kUp, kKfSlices);
  const double disp0 = SumBoth(first.snapshot.kf_metrics, "kube_fanout_events_dispatched_total");
  std::string t =
      "Timeline of the churn and drain: cumulative counts since the churn started, queues at the "
      "sample, CPU over the interval in % of one core. A write reaches kube-fanout as one "
      "upstream event; \"got from upstream\" falling behind \"writes\" means the events wait "
      "before kube-fanout's caches (\"unread upstream\": in kube-fanout's socket buffers from the "
      "apiserver).\n\n"
      "| t (s) | writes pods / slices | kube-fanout got from upstream pods / slices | "
      "unread upstream (KiB) | dispatched (k) | "
      "delivered (k) | queued in kube-fanout (MiB) | unacked kube-fanout → client (MiB) | "
      "unread by client (MiB) | kube-fanout CPU | client CPU | apiserver+etcd CPU | "
      "other processes CPU | machine busy |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (size_t i = 1; i < r.timeline.size(); ++i) {
    const TimelinePoint& p = r.timeline[i];
    const CpuSplit c = Split(r.timeline[i - 1].snapshot, p.snapshot);
    const double disp =
        SumBoth(p.snapshot.kf_metrics, "kube_fanout_events_dispatched_total") - disp0;
    const double queued = SumBoth(p.snapshot.kf_metrics, "kube_fanout_watch_queue_bytes");
    absl::StrAppend(
        &t,
        Fmt("| %.0f | %lu / %lu | %.0f / %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f | %.0f%% | "
            "%.0f%% | %.0f%% | %.0f%% | %.0f%% |\n",
            Seconds(first.snapshot, p.snapshot), U(p.pod_writes), U(p.slice_writes),
            metric(p, kUp, "pods") - up_pods0, metric(p, kUp, kKfSlices) - up_slices0,
            static_cast<double>(p.sockets.upstream_unread) / 1024.0, disp / 1000,
            static_cast<double>(p.delivered) / 1000, queued / 1048576.0,
            static_cast<double>(p.sockets.server_unacked) / 1048576.0,
            static_cast<double>(p.sockets.client_unread) / 1048576.0, Pct(c.kube_fanout, c.wall),
            Pct(c.client, c.wall), Pct(c.named, c.wall), Pct(c.rest, c.wall),
            Pct(c.machine, c.wall)));
  }
  out.Block(t);
}

void Results(const RunRecord& r, BenchReport& out) {
  auto rss = [](const Snapshot& s) { return s.kube_fanout ? s.kube_fanout->rss_kib : 0; };
  auto cpu = [](const Snapshot& s) { return s.kube_fanout ? s.kube_fanout->cpu_seconds : 0.0; };
  const auto& t = r.at_churn_end;
  const double window = Seconds(r.churn_start, r.churn_end);
  const uint64_t events = std::max<uint64_t>(1, t.measured());
  const double kf_cpu = cpu(r.churn_end) - cpu(r.churn_start);
  out.Result("watchers", Fmt("%d", r.flags.watchers));
  out.Result("wire", r.flags.wire);
  out.Result("http", r.flags.streams_per_connection > 0 ? "h2" : "http1.1");
  out.Result("tls", r.flags.tls_proxy.empty() ? "0" : "1");
  out.Result("connections", Fmt("%lu", U(r.at_ramped.connections)));
  out.Result("bytes_per_event",
             Fmt("%.0f", static_cast<double>(t.bytes - r.at_churn_start.bytes) / events));
  out.Result("connected", Fmt("%lu", U(t.connected)));
  out.Result("failed", Fmt("%lu", U(t.failed)));
  out.Result("ended", Fmt("%lu", U(t.ended)));
  out.Result("api_watch_pods", Count(ApiserverWatches(r.ramped.api_metrics, "pods")));
  out.Result("api_watch_slices", Count(ApiserverWatches(r.ramped.api_metrics, "endpointslices")));
  out.Result("writes", Fmt("%lu", U(r.churn.writes_of(tools::Kind::kPods) +
                                    r.churn.writes_of(tools::Kind::kEndpointSlices))));
  out.Result("events", Fmt("%lu", U(t.measured())));
  out.Result("expected", Fmt("%lu", U(r.expected_pod_events + r.expected_slice_events)));
  out.Result("events_per_s", Fmt("%.0f", t.measured() / std::max(window, 1e-9)));
  out.Result("p50_ms", Fmt("%.1f", Ms(r.latency.PercentileMicros(0.5))));
  out.Result("p90_ms", Fmt("%.1f", Ms(r.latency.PercentileMicros(0.9))));
  out.Result("p99_ms", Fmt("%.1f", Ms(r.latency.PercentileMicros(0.99))));
  out.Result("max_ms", Fmt("%.1f", Ms(r.latency.max_us())));
  out.Result("pods_p50_ms", Fmt("%.1f", Ms(r.pod_latency.PercentileMicros(0.5))));
  out.Result("pods_p99_ms", Fmt("%.1f", Ms(r.pod_latency.PercentileMicros(0.99))));
  out.Result("rss_idle_mib", Fmt("%.1f", Mib(rss(r.idle))));
  out.Result("rss_watchers_mib", Fmt("%.1f", Mib(rss(r.ramped))));
  out.Result("rss_per_watcher_kib",
             Fmt("%.2f", (static_cast<double>(rss(r.ramped)) - static_cast<double>(rss(r.idle))) /
                             std::max<uint64_t>(1, r.at_ramped.connected)));
  out.Result("kf_cpu_s", Fmt("%.2f", kf_cpu));
  out.Result("kf_cpu_us_per_event", Fmt("%.2f", kf_cpu * 1e6 / events));
  const double writes = WatchWrites(r);
  if (writes > 0) out.Result("events_per_write", Fmt("%.2f", static_cast<double>(events) / writes));
  out.Result("client_cpu_s", Fmt("%.2f", r.churn_end.self_cpu - r.churn_start.self_cpu));
  const CpuSplit churn = Split(r.churn_start, r.churn_end);
  out.Result("machine_busy_pct", Fmt("%.0f", Pct(churn.machine, churn.wall)));
  out.Result("other_procs_pct", Fmt("%.0f", Pct(churn.rest, churn.wall)));
  const CpuSplit idle = Split(r.before_idle, r.idle);
  out.Result("background_pct", Fmt("%.0f", Pct(idle.rest, idle.wall)));
}

}  // namespace

BenchReport Summarize(const RunRecord& r) {
  BenchReport out;
  SetupRows(r, out);
  WatcherRows(r, out);
  UpstreamRows(r, out);
  ChurnRows(r, out);
  DeliveryRows(r, out);
  ResourceRows(r, out);
  MachineRows(r, out);
  Timeline(r, out);
  Results(r, out);
  for (const auto& p : r.problems) out.Note("problem: " + p);
  for (const auto& f : r.churn.failure_samples) out.Note("write failure: " + f);
  for (const auto& f : r.watch_failures) out.Note("watch: " + f);
  return out;
}

}  // namespace kf::bench
