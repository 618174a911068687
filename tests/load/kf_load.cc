// kf_load: one mode of the load test (tests/load/CONTRACT.md). Simulated node agents (kubelets,
// kube-proxies, log-shipper pollers) against one target, the apiserver or kube-fanout, while a
// churn of writes goes to the apiserver; then a JSON result: delivery latency, completeness of
// every watch stream, requests, connections, a timeline.
//
// Phases, each bounded: setup → ramp (agents started at --ramp-rate, until their first LISTs
// are answered) → churn (--duration) → drain (--drain) → stop. tests/load/run-load runs it once
// per mode and samples the servers around it. This file: flags, phases, the result.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/bench/proc_stats.h"
#include "tests/bench/process_limits.h"
#include "tests/load/agents.h"
#include "tests/load/completeness.h"
#include "tests/load/load_report.h"
#include "tests/load/readiness.h"
#include "tests/tools/api_client.h"
#include "tests/tools/churn.h"
#include "tests/tools/write_stamp.h"

namespace kf::load {
namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

struct Flags {
  std::string target, apiserver, ca_file, token_env = "KF_ADMIN_TOKEN", label, out;
  std::string node_ca_cert, node_ca_key;
  std::string target_readyz;
  int readyz_interval_ms = 200;
  std::string wire = "json";
  bool http2 = false;
  int kubelets = 1000, kube_proxies = 0, pollers = 0;
  int configmaps_per_kubelet = 2;
  double poll_interval = 5;
  int poller_list_nodes = 0;
  double ramp_rate = 200;
  double duration = 60, drain = 5;
  double pod_rate = 20, node_rate = 5, slice_rate = 5, event_rate = 10, configmap_rate = 0;
  int threads = 2;
  std::string namespace_ = "kf-load";
  int pods_per_node = 2, services = 30, endpoints_per_slice = 10;
  int source_ips = 0;
  int settle_max = 30;
  int max_runtime = 0;
  uint32_t seed = 1;
  bool setup_only = false, progress = false, help = false;
  bool reference_watch = false, poisson_writes = false;
};

po::options_description Describe(Flags* f) {
  po::options_description d("Flags", 100, 50);
  // clang-format off
  d.add_options()
    ("target", po::value(&f->target)->value_name("URL"),
     "Where the agents connect: https://HOST:PORT (apiserver, kube-fanout TLS) or http://HOST:PORT; "
     "several, comma-separated (same scheme and host): replicas, each new connection to the next.")
    ("target-readyz", po::value(&f->target_readyz)->value_name("URL[,URL...]"),
     "Each --target replica's readiness, in the same order (http://HOST:PORT/readyz of its "
     "metrics listener): asked every --readyz-interval-ms; new connections go only to ready "
     "replicas while any is (else to one that answers), as a Service's endpoints and "
     "kube-proxy do.")
    ("readyz-interval-ms", po::value(&f->readyz_interval_ms)->default_value(f->readyz_interval_ms),
     "How often --target-readyz is asked.")
    ("apiserver", po::value(&f->apiserver)->value_name("URL"),
     "Where setup and churn writes go (always the apiserver), https://HOST:PORT.")
    ("ca-file", po::value(&f->ca_file)->value_name("PATH"), "CA for both URLs.")
    ("token-env", po::value(&f->token_env)->default_value(f->token_env),
     "Environment variable holding the bearer token.")
    ("label", po::value(&f->label)->default_value(""), "Copied into the output (direct, kube-fanout).")
    ("kubelets", po::value(&f->kubelets)->default_value(f->kubelets), "Kubelet-like agents.")
    ("kube-proxies", po::value(&f->kube_proxies)->default_value(f->kube_proxies),
     "Kube-proxy-like agents.")
    ("pollers", po::value(&f->pollers)->default_value(f->pollers), "Polling agents.")
    ("configmaps-per-kubelet", po::value(&f->configmaps_per_kubelet)->default_value(2),
     "Single-object watches of configmaps lcm-0..lcm-K-1 per kubelet.")
    ("poll-interval", po::value(&f->poll_interval)->default_value(5), "Seconds between a poller's rounds.")
    ("poller-list-nodes", po::value(&f->poller_list_nodes)->default_value(0),
     "N > 0: pollers LIST the pods of one of node-0..node-N-1 (by spec.nodeName) instead of the "
     "whole namespace's.")
    ("ramp-rate", po::value(&f->ramp_rate)->default_value(200), "Agents started per second.")
    ("duration", po::value(&f->duration)->default_value(60), "Seconds of churn after the ramp.")
    ("drain", po::value(&f->drain)->default_value(5), "Seconds after the churn before agents stop.")
    ("pod-rate", po::value(&f->pod_rate)->default_value(20), "Pod writes per second.")
    ("node-rate", po::value(&f->node_rate)->default_value(5), "Node writes per second.")
    ("slice-rate", po::value(&f->slice_rate)->default_value(5), "EndpointSlice writes per second.")
    ("event-rate", po::value(&f->event_rate)->default_value(10), "Event creations per second.")
    ("configmap-rate", po::value(&f->configmap_rate)->default_value(0),
     "Writes per second to the lcm-* configmaps (each reaches every kubelet).")
    ("threads", po::value(&f->threads)->default_value(2), "Agent threads.")
    ("namespace", po::value(&f->namespace_)->default_value(f->namespace_), "The scenario's namespace.")
    ("pods-per-node", po::value(&f->pods_per_node)->default_value(2),
     "Pods per kubelet's node (bound to random nodes).")
    ("services", po::value(&f->services)->default_value(30), "Services, one EndpointSlice each.")
    ("endpoints-per-slice", po::value(&f->endpoints_per_slice)->default_value(10),
     "Endpoints in each EndpointSlice.")
    ("source-ips", po::value(&f->source_ips)->default_value(0),
     "Spread agent connections over 127.0.0.1..N (loopback targets); 0: as many as the "
     "connection count needs.")
    ("settle-max", po::value(&f->settle_max)->default_value(30),
     "At most this many seconds after the last agent starts for the first LISTs to finish.")
    ("seed", po::value(&f->seed)->default_value(1), "Seed for pod placement and write targets.")
    ("max-runtime", po::value(&f->max_runtime)->default_value(0),
     "Watchdog: exit with status 3 after this many seconds (0: a bound derived from the flags).")
    ("node-ca-cert", po::value(&f->node_ca_cert),
     "With --node-ca-key: kubelets authenticate as their nodes (system:node:node-i, group "
     "system:nodes) with client certificates this CA signs at their start, not the token; pods "
     "then mount the lcm-* ConfigMaps so the Node authorizer lets kubelets read them.")
    ("node-ca-key", po::value(&f->node_ca_key), "The --node-ca-cert CA's private key.")
    ("wire", po::value(&f->wire)->default_value("json"),
     "What the agents ask for: json, or protobuf (client-go's Accept for kubelet and "
     "kube-proxy).")
    ("http2", po::bool_switch(&f->http2),
     "Kubelets and kube-proxies multiplex all their requests on one HTTP/2 connection each, as "
     "client-go does (ALPN h2 over TLS, prior knowledge in plain HTTP); pollers stay on "
     "HTTP/1.1.")
    ("reference-watch", po::bool_switch(&f->reference_watch),
     "Also LIST+WATCH every pod, Node and EndpointSlice straight from --apiserver, one "
     "connection each (HTTP/1.1, the agents' --wire), from before the ramp to the end: the "
     "apiserver's own write -> event latency to one watcher, beside the agents' "
     "(reference.latency_us). Costs the apiserver 3 LISTs and 3 WATCHes.")
    ("poisson-writes", po::bool_switch(&f->poisson_writes),
     "The churn's writers write as Poisson processes of their rates (seeded by --seed), so the "
     "kinds' writes meet only by chance; default: evenly spaced, and kinds whose rates divide "
     "each other's write at the same instants.")
    ("setup-only", po::bool_switch(&f->setup_only), "Create the scenario's objects and exit.")
    ("out", po::value(&f->out)->value_name("PATH"), "The JSON result (default: stdout).")
    ("progress", po::bool_switch(&f->progress), "One progress line per second on stderr.")
    ("help,h", po::bool_switch(&f->help), "Print this help and exit.");
  // clang-format on
  return d;
}

void Log(const std::string& line) { std::fprintf(stderr, "kf_load: %s\n", line.c_str()); }

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct TimelinePoint {
  double t;
  AgentProgress agents;
  uint64_t writes;
};

// Samples the counters at every whole second since the ramp started, from whatever loop the
// main thread is in, and prints the progress line.
class Timeline {
 public:
  Timeline(const AgentPool& pool, const tools::Churn& churn, bool progress, std::string label)
      : pool_(pool), churn_(churn), progress_(progress), label_(std::move(label)) {}

  void Begin() { start_ = Clock::now(); }
  void SetPhase(const char* phase) { phase_ = phase; }
  void Tick() {
    while (Clock::now() >= start_ + seconds(next_)) {
      TimelinePoint p{static_cast<double>(next_), pool_.Progress(), churn_.writes_so_far()};
      if (progress_) Print(p);
      points_.push_back(p);
      ++next_;
    }
  }
  // Sleeps until `until`, sampling on the way; stops early once `done` says so.
  template <typename Done>
  void SleepUntil(Clock::time_point until, Done done) {
    for (;;) {
      Tick();
      const auto now = Clock::now();
      if (now >= until || done()) return;
      const auto next_tick = start_ + seconds(next_);
      std::this_thread::sleep_until(
          std::min({until, next_tick, now + std::chrono::milliseconds(100)}));
    }
  }
  void SleepUntil(Clock::time_point until) {
    SleepUntil(until, [] { return false; });
  }
  const std::vector<TimelinePoint>& points() const { return points_; }

 private:
  void Print(const TimelinePoint& p) {
    const AgentProgress& a = p.agents;
    const uint64_t prev_events = points_.empty() ? 0 : points_.back().agents.events;
    std::fprintf(
        stderr,
        "kf_load[%s] %4.0fs %-6s agents=%lu conns=%lu watches=%lu pending_lists=%lu "
        "events=%lu (+%lu) requests=%lu errors=%lu relists=%lu conn_failed=%lu "
        "writes=%lu\n",
        label_.c_str(), p.t, phase_, static_cast<unsigned long>(a.agents),
        static_cast<unsigned long>(a.open_connections), static_cast<unsigned long>(a.open_watches),
        static_cast<unsigned long>(a.pending_first_lists), static_cast<unsigned long>(a.events),
        static_cast<unsigned long>(a.events - prev_events), static_cast<unsigned long>(a.requests),
        static_cast<unsigned long>(a.errors), static_cast<unsigned long>(a.relists),
        static_cast<unsigned long>(a.failed_connections), static_cast<unsigned long>(p.writes));
  }

  const AgentPool& pool_;
  const tools::Churn& churn_;
  const bool progress_;
  const std::string label_;
  const char* phase_ = "ramp";
  Clock::time_point start_;
  int64_t next_ = 0;
  std::vector<TimelinePoint> points_;
};

// The order in which agents start: the three kinds interleaved in proportion (seeded shuffle),
// as a fleet comes up, not all kubelets first.
std::vector<std::pair<AgentType, int>> StartOrder(const Flags& f) {
  std::vector<std::pair<AgentType, int>> order;
  for (int i = 0; i < f.kubelets; ++i) order.emplace_back(AgentType::kKubelet, i);
  for (int i = 0; i < f.kube_proxies; ++i) order.emplace_back(AgentType::kKubeProxy, i);
  for (int i = 0; i < f.pollers; ++i) order.emplace_back(AgentType::kPoller, i);
  std::mt19937 rng(f.seed + 3);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

struct Phases {
  double setup = 0, ramp = 0, churn = 0, drain = 0;
};

// kf_load's own cost, at the end of the drain with every connection still open: so that a
// client-side limit is not mistaken for a server's.
struct SelfCost {
  double cpu_s = 0;
  double rss_mib = 0, peak_rss_mib = 0;
  double heap_in_use_mib = 0;  // malloc's live bytes: RSS without what the ramp left free.
};

SelfCost MeasureSelf() {
  SelfCost c;
  c.cpu_s = bench::SelfCpuSeconds();
  if (auto p = bench::ReadProc(getpid())) c.rss_mib = static_cast<double>(p->rss_kib) / 1024;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024;
  const struct mallinfo2 mi = mallinfo2();
  c.heap_in_use_mib = static_cast<double>(mi.uordblks + mi.hblkhd) / (1024 * 1024);
  return c;
}

// --reference-watch: what the watcher straight at the apiserver saw.
struct Reference {
  AgentResults results;
  Completeness completeness;
};

void WriteReference(JsonWriter& w, const Reference& r) {
  w.Key("reference");
  w.StartObject();
  w.Key("latency_us");
  w.StartObject();
  for (Kind kind : {Kind::kPods, Kind::kNodes, Kind::kEndpointSlices}) {
    w.Key(std::string(KindName(kind)).c_str());
    WriteLatency(w, r.results.latency[static_cast<size_t>(kind)], true);
  }
  w.EndObject();
  w.Key("streams_checked");
  w.Uint64(r.completeness.checked);
  w.Key("streams_complete");
  w.Uint64(r.completeness.complete);
  w.Key("missing_events");
  w.Uint64(r.completeness.missing_events);
  w.EndObject();
}

void WriteResult(JsonWriter& w, const Flags& f, const Phases& phases, double started_unix,
                 const AgentResults& results, const Completeness& c, const AgentProgress& at_end,
                 const SelfCost& self, const tools::Churn::Stats& churn, const Timeline& timeline,
                 const std::vector<std::string>& failures, const Reference* reference) {
  auto num = [&w](const char* key, double v) {
    w.Key(key);
    w.Double(v);
  };
  auto u64 = [&w](const char* key, uint64_t v) {
    w.Key(key);
    w.Uint64(v);
  };
  w.StartObject();
  w.Key("label");
  w.String(f.label.c_str());
  w.Key("target");
  w.String(f.target.c_str());

  w.Key("config");
  w.StartObject();
  u64("kubelets", static_cast<uint64_t>(f.kubelets));
  u64("kube_proxies", static_cast<uint64_t>(f.kube_proxies));
  u64("pollers", static_cast<uint64_t>(f.pollers));
  num("ramp_rate", f.ramp_rate);
  num("duration_s", f.duration);
  num("drain_s", f.drain);
  u64("configmaps_per_kubelet", static_cast<uint64_t>(f.configmaps_per_kubelet));
  num("poll_interval_s", f.poll_interval);
  w.Key("rates");
  w.StartObject();
  num("pods", f.pod_rate);
  num("nodes", f.node_rate);
  num("endpointslices", f.slice_rate);
  num("events", f.event_rate);
  num("configmaps", f.configmap_rate);
  w.EndObject();
  u64("threads", static_cast<uint64_t>(f.threads));
  w.Key("namespace");
  w.String(f.namespace_.c_str());
  u64("pods_per_node", static_cast<uint64_t>(f.pods_per_node));
  u64("services", static_cast<uint64_t>(f.services));
  u64("endpoints_per_slice", static_cast<uint64_t>(f.endpoints_per_slice));
  u64("source_ips", static_cast<uint64_t>(f.source_ips));
  w.Key("poisson_writes");
  w.Bool(f.poisson_writes);
  w.EndObject();

  w.Key("phases");
  w.StartObject();
  num("setup_s", phases.setup);
  num("ramp_s", phases.ramp);
  num("churn_s", phases.churn);
  num("drain_s", phases.drain);
  w.EndObject();
  num("started_unix", started_unix);

  w.Key("latency_us");
  w.StartObject();
  for (Kind kind : {Kind::kPods, Kind::kNodes, Kind::kEndpointSlices, Kind::kConfigMaps}) {
    const auto& h = results.latency[static_cast<size_t>(kind)];
    if (kind == Kind::kConfigMaps && f.configmap_rate <= 0 && h.count() == 0) continue;
    w.Key(std::string(KindName(kind)).c_str());
    WriteLatency(w, h, true);
  }
  w.EndObject();

  w.Key("completeness");
  w.StartObject();
  u64("watch_streams", c.watch_streams);
  u64("checked", c.checked);
  u64("complete", c.complete);
  u64("incomplete", c.incomplete);
  u64("relisted_after_410", c.relisted_after_410);
  u64("out_of_order", c.out_of_order);
  u64("duplicates", c.duplicates);
  u64("missing_events", c.missing_events);
  u64("never_listed", c.never_listed);
  u64("expected_events", c.expected_events);
  w.Key("incomplete_samples");
  w.StartArray();
  for (const IncompleteStream& i : c.samples) {
    w.StartObject();
    w.Key("resource");
    w.String(std::string(KindName(i.kind)).c_str());
    w.Key("key");
    w.Int(i.key);
    u64("start_rv", i.start_rv);
    u64("resume_rv", i.resume_rv);
    u64("missing", i.missing);
    u64("out_of_order", i.out_of_order);
    u64("duplicates", i.duplicates);
    w.Key("first_missing");
    w.SetFormatOptions(rapidjson::kFormatSingleLineArray);
    w.StartArray();
    for (uint64_t rv : i.first_missing) w.Uint64(rv);
    w.EndArray();
    w.SetFormatOptions(rapidjson::kFormatDefault);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  w.Key("requests");
  w.StartObject();
  w.Key("by_verb");
  w.StartObject();
  u64("list", results.by_verb[kList]);
  u64("watch", results.by_verb[kWatch]);
  u64("get", results.by_verb[kGet]);
  w.EndObject();
  w.Key("by_status");
  w.StartObject();
  for (const auto& [status, n] : results.by_status) u64(std::to_string(status).c_str(), n);
  w.EndObject();
  u64("errors", results.errors);
  u64("timeouts", results.timeouts);
  w.Key("latency_us");
  w.StartObject();
  w.Key("list");
  WriteLatency(w, results.list_latency, false);
  w.Key("get");
  WriteLatency(w, results.get_latency, false);
  w.EndObject();
  w.EndObject();

  w.Key("connections");
  w.StartObject();
  u64("peak_open", at_end.peak_connections);
  u64("open_at_end", at_end.open_connections);
  u64("failed", at_end.failed_connections);
  w.EndObject();

  w.Key("watch");
  w.StartObject();
  u64("events", at_end.events);
  u64("bookmarks", at_end.bookmarks);
  u64("bytes", at_end.watch_bytes);
  u64("relists", at_end.relists);
  u64("open_at_end", at_end.open_watches);
  u64("ended", results.watch_ends);
  w.EndObject();

  w.Key("self");
  w.StartObject();
  num("cpu_s", self.cpu_s);
  num("rss_mib", self.rss_mib);
  num("peak_rss_mib", self.peak_rss_mib);
  num("heap_in_use_mib", self.heap_in_use_mib);
  w.EndObject();

  w.Key("churn");
  w.StartObject();
  w.Key("writes");
  w.StartObject();
  for (Kind kind :
       {Kind::kPods, Kind::kNodes, Kind::kEndpointSlices, Kind::kEvents, Kind::kConfigMaps}) {
    u64(std::string(KindName(kind)).c_str(), churn.writes[static_cast<size_t>(kind)]);
  }
  w.EndObject();
  u64("failed", churn.failed);
  u64("late", churn.late);
  w.Key("write_latency_us");
  WriteLatency(w, churn.write_latency, false);
  w.Key("failure_samples");
  w.StartArray();
  for (const auto& s : churn.failure_samples) w.String(s.c_str());
  w.EndArray();
  w.EndObject();

  w.Key("timeline");
  w.StartArray();
  for (const TimelinePoint& p : timeline.points()) {
    w.StartObject();
    num("t", p.t);
    u64("open_watches", p.agents.open_watches);
    u64("events", p.agents.events);
    u64("requests", p.agents.requests);
    u64("connections", p.agents.open_connections);
    u64("errors", p.agents.errors);
    u64("writes", p.writes);
    w.EndObject();
  }
  w.EndArray();

  w.Key("failure_samples");
  w.StartArray();
  for (const auto& s : failures) w.String(s.c_str());
  w.EndArray();
  if (reference != nullptr) WriteReference(w, *reference);
  w.EndObject();
}

// --target-readyz: one URL per replica, polled from now on into `out`.
absl::Status StartReadiness(const Flags& f, size_t replicas, std::optional<ReadinessProbe>& out) {
  std::vector<tools::Endpoint> readyz;
  for (absl::string_view url : absl::StrSplit(f.target_readyz, ',')) {
    url = absl::StripSuffix(url, "/readyz");
    auto e = tools::Endpoint::Parse(std::string_view(url.data(), url.size()));
    if (!e.ok()) return e.status();
    readyz.push_back(*std::move(e));
  }
  if (readyz.size() != replicas) {
    return absl::InvalidArgumentError("one URL per --target replica, in the same order");
  }
  if (f.readyz_interval_ms <= 0) return absl::InvalidArgumentError("the interval must be > 0");
  out.emplace(std::move(readyz), std::chrono::milliseconds(f.readyz_interval_ms));
  return out->Start();
}

int Main(int argc, char** argv) {
  Flags f;
  po::options_description desc = Describe(&f);
  po::variables_map vm;
  try {  // program_options reports bad flags only by throwing.
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "kf_load: %s\nRun 'kf_load --help' for usage.\n", e.what());
    return 2;
  }
  if (f.help) {
    std::cout << "Usage: kf_load --target=URL --apiserver=URL --ca-file=PATH [flags]\n\n"
                 "One mode of the load test (tests/load/CONTRACT.md): simulated kubelets,\n"
                 "kube-proxies and pollers against --target while writes churn on --apiserver;\n"
                 "writes a JSON result. Normally run by tests/load/run-load.\n\n"
              << desc << "\n";
    return 0;
  }
  const char* token = std::getenv(f.token_env.c_str());
  if (token == nullptr || *token == '\0') {
    std::fprintf(stderr, "kf_load: $%s is not set\n", f.token_env.c_str());
    return 2;
  }
  auto api = tools::Endpoint::Parse(f.apiserver);
  // --target=URL[,URL...]: replicas behind one name (same scheme and host, other ports).
  std::vector<std::string> targets =
      absl::StrSplit(f.setup_only && f.target.empty() ? f.apiserver : f.target, ',');
  auto target = tools::Endpoint::Parse(targets[0]);
  std::vector<std::string> more_ports;
  for (size_t i = 1; i < targets.size() && target.ok(); ++i) {
    auto more = tools::Endpoint::Parse(targets[i]);
    if (!more.ok() || more->tls != target->tls || more->host != target->host) {
      std::fprintf(stderr, "kf_load: the --target replicas must share scheme and host\n");
      return 2;
    }
    more_ports.push_back(more->port);
  }
  if (!api.ok() || !target.ok()) {
    std::fprintf(stderr, "kf_load: --apiserver and --target want [http[s]://]HOST:PORT\n");
    return 2;
  }
  if (f.kubelets < 0 || f.kube_proxies < 0 || f.pollers < 0 || f.configmaps_per_kubelet < 0 ||
      f.ramp_rate <= 0 || f.duration < 0 || f.drain < 0 || f.threads < 1 || f.poll_interval <= 0 ||
      f.pods_per_node < 0 || f.services < 0 || f.endpoints_per_slice < 1 || f.source_ips < 0 ||
      f.pod_rate < 0 || f.node_rate < 0 || f.slice_rate < 0 || f.event_rate < 0 ||
      f.configmap_rate < 0) {
    std::fprintf(stderr,
                 "kf_load: counts and rates must not be negative; --ramp-rate, "
                 "--poll-interval and --threads must be positive\n");
    return 2;
  }
  api->ca_file = f.ca_file;
  target->ca_file = f.ca_file;

  const uint64_t connections =
      static_cast<uint64_t>(f.kubelets) * (2 + static_cast<uint64_t>(f.configmaps_per_kubelet)) +
      2 * static_cast<uint64_t>(f.kube_proxies) + static_cast<uint64_t>(f.pollers);
  if (const rlim_t nofile = bench::RaiseNoFile(static_cast<rlim_t>(connections + 1024));
      nofile < connections + 1024) {
    Log(absl::StrCat("warning: ", connections, " connections wanted but only ", nofile,
                     " file descriptors allowed (ulimit -Hn); the rest will fail"));
  }
  const bool loopback = target->host.rfind("127.", 0) == 0;
  if (f.source_ips == 0) {
    // About 28,000 ephemeral ports per source address and server port; keep well below.
    f.source_ips =
        loopback ? static_cast<int>(std::min<uint64_t>(connections / 20000 + 1, 250)) : 1;
  }

  const double agents = f.kubelets + f.kube_proxies + f.pollers;
  const int bound = f.max_runtime > 0
                        ? f.max_runtime
                        : 900 + static_cast<int>(agents / f.ramp_rate) + f.settle_max +
                              static_cast<int>(f.duration + f.drain) + 120;
  bench::Watchdog watchdog("kf_load", seconds(bound));

  tools::Churn::Options co;
  co.namespace_ = f.namespace_;
  co.nodes = f.kubelets;
  co.pods = f.kubelets * f.pods_per_node;
  co.slices = f.services;
  co.endpoints_per_slice = f.endpoints_per_slice;
  co.configmaps = f.configmaps_per_kubelet;
  if (!f.node_ca_cert.empty()) co.pod_configmap_volumes = f.configmaps_per_kubelet;
  co.rates[static_cast<size_t>(Kind::kPods)] = f.pod_rate;
  co.rates[static_cast<size_t>(Kind::kNodes)] = f.node_rate;
  co.rates[static_cast<size_t>(Kind::kEndpointSlices)] = f.slice_rate;
  co.rates[static_cast<size_t>(Kind::kEvents)] = f.event_rate;
  co.rates[static_cast<size_t>(Kind::kConfigMaps)] = f.configmap_rate;
  co.seed = f.seed;
  co.poisson = f.poisson_writes;
  tools::Churn churn(*api, token, co);

  Phases phases;
  auto t0 = Clock::now();
  if (absl::Status s = churn.Setup(); !s.ok()) {
    Log(absl::StrCat("setup failed: ", s.message()));
    return 1;
  }
  phases.setup = Since(t0);
  Log(absl::StrCat("setup: ", churn.pods(), " pods on ", f.kubelets, " nodes, ", f.services,
                   " services in ", f.namespace_, " ready in ", phases.setup, "s"));
  if (f.setup_only) return 0;

  std::optional<ReadinessProbe> readiness;
  if (!f.target_readyz.empty()) {
    auto probe = StartReadiness(f, 1 + more_ports.size(), readiness);
    if (!probe.ok()) {
      std::fprintf(stderr, "kf_load: --target-readyz: %s\n", probe.ToString().c_str());
      return 2;
    }
  }
  AgentOptions ao;
  ao.namespace_ = f.namespace_;
  ao.configmaps_per_kubelet = f.configmaps_per_kubelet;
  ao.pods = churn.pods();
  ao.poll_interval_s = f.poll_interval;
  ao.poller_list_nodes = f.poller_list_nodes;
  ao.threads = f.threads;
  ao.source_ips = loopback ? f.source_ips : 1;
  ao.seed = f.seed;
  ao.node_ca_cert_file = f.node_ca_cert;
  ao.node_ca_key_file = f.node_ca_key;
  ao.protobuf = f.wire == "protobuf";
  ao.http2 = f.http2;
  ao.more_ports = more_ports;
  ao.readiness = readiness ? &*readiness : nullptr;
  const double started_unix = static_cast<double>(tools::UnixNanos()) / 1e9;
  ao.measure_from_unix_ns = tools::UnixNanos();
  AgentPool pool(*target, token, ao);
  if (absl::Status s = pool.Start(); !s.ok()) {
    Log(absl::StrCat("agents: ", s.message()));
    return 1;
  }
  // --reference-watch: one watcher of each timed kind at the apiserver itself, with the token.
  std::optional<AgentPool> reference;
  if (f.reference_watch) {
    AgentOptions ro = ao;
    ro.threads = 1;
    ro.source_ips = 1;
    ro.http2 = false;
    ro.node_ca_cert_file.clear();
    ro.node_ca_key_file.clear();
    ro.more_ports.clear();
    ro.readiness = nullptr;
    reference.emplace(*api, token, ro);
    if (absl::Status s = reference->Start(); !s.ok()) {
      Log(absl::StrCat("reference watch: ", s.message()));
      return 1;
    }
    reference->StartAgent(AgentType::kReference, 0);
  }

  // Ramp: agents start at --ramp-rate; then, bounded, until every first LIST is answered.
  Timeline timeline(pool, churn, f.progress, f.label);
  timeline.Begin();
  t0 = Clock::now();
  const auto order = StartOrder(f);
  for (size_t i = 0; i < order.size(); ++i) {
    timeline.SleepUntil(t0 +
                        std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(static_cast<double>(i) / f.ramp_rate)));
    pool.StartAgent(order[i].first, order[i].second);
  }
  timeline.SleepUntil(Clock::now() + seconds(f.settle_max), [&pool, &reference] {
    return pool.Progress().pending_first_lists == 0 &&
           (!reference || reference->Progress().pending_first_lists == 0);
  });
  phases.ramp = Since(t0);
  const AgentProgress ramped = pool.Progress();
  Log(absl::StrCat("ramp: ", order.size(), " agents in ", phases.ramp, "s, ", ramped.open_watches,
                   " of ", ramped.streams, " watches open, ", ramped.pending_first_lists,
                   " first LISTs unanswered, ", ramped.failed_connections, " connections failed"));

  timeline.SetPhase("churn");
  t0 = Clock::now();
  churn.Start();
  timeline.SleepUntil(
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.duration)));
  churn.Stop();
  phases.churn = Since(t0);

  timeline.SetPhase("drain");
  t0 = Clock::now();
  timeline.SleepUntil(
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.drain)));
  phases.drain = Since(t0);
  const AgentProgress at_end = pool.Progress();
  const SelfCost self = MeasureSelf();
  pool.Stop(seconds(15));
  if (reference) reference->Stop(seconds(15));

  const tools::Churn::Stats stats = churn.GetStats();
  const AgentResults results = pool.GetResults();
  auto key_of = [&churn](Kind kind, uint32_t object) {
    switch (kind) {
      case Kind::kPods:
        return churn.PodNode(object);
      case Kind::kNodes:
      case Kind::kConfigMaps:
        return static_cast<int32_t>(object);
      default:
        return int32_t{-1};
    }
  };
  const Completeness completeness = CheckCompleteness(pool.Streams(), stats.log, key_of);
  std::optional<Reference> reference_result;
  if (reference) {
    reference_result = Reference{reference->GetResults(),
                                 CheckCompleteness(reference->Streams(), stats.log, key_of)};
  }
  const std::vector<std::string> failures = pool.FailureSamples();

  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.SetIndent(' ', 2);
  WriteResult(writer, f, phases, started_unix, results, completeness, at_end, self, stats, timeline,
              failures, reference_result ? &*reference_result : nullptr);
  if (f.out.empty()) {
    std::printf("%s\n", buffer.GetString());
  } else {
    std::ofstream out(f.out);
    out << buffer.GetString() << "\n";
    if (!out) {
      Log(absl::StrCat("cannot write ", f.out));
      return 1;
    }
  }
  const auto& pods = results.latency[static_cast<size_t>(Kind::kPods)];
  Log(absl::StrCat("done: ", completeness.checked, " streams checked, ", completeness.complete,
                   " complete, ", completeness.missing_events, " events missing, ",
                   completeness.relisted_after_410, " relisted after 410; pod latency p50 ",
                   pods.PercentileMicros(0.5), "us p99 ", pods.PercentileMicros(0.99), "us; ",
                   results.errors, " request errors"));
  for (const auto& s : failures) Log(absl::StrCat("  failure: ", s));
  if (readiness) {
    Log(absl::StrCat("readiness: replicas went unready ", readiness->went_unready(),
                     " times and ready again ", readiness->went_ready(), " times"));
  }
  uint64_t answered = 0;
  for (const auto& [status, n] : results.by_status) answered += n;
  if (answered == 0 && agents > 0) {
    Log("nothing could connect to the target");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kf::load

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // A server that went away is an error to count, not a crash.
  return kf::load::Main(argc, argv);
}
