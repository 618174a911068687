// kf_list_bench: the cached-LIST throughput benchmark (issue 13, item 4). C clients, each on its
// own keep-alive connection, send one GET (a LIST, usually) after another to one target for a
// bounded time and read every answer whole; the program prints requests/s, the latency
// distribution, bytes per answer and the CPU each watched process used per request.
//
// It only prints numbers: tests/bench/run-list-bench starts the control plane and kube-fanout,
// makes the pods, and runs it against kube-fanout and the apiserver in turn
// (docs/benchmarks.md). With --setup-pods it first makes the fan-out benchmark's objects (the
// same pods, labels and nodes as kf_fanout_bench, kept if they exist) and exits.
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "tests/bench/bench_run.h"
#include "tests/bench/proc_stats.h"
#include "tests/tools/api_client.h"
#include "tests/tools/churn.h"
#include "tests/tools/latency_histogram.h"

namespace kf::bench {
namespace {

namespace po = boost::program_options;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string target, apiserver, ca_file, token_env = "KF_ADMIN_TOKEN", path, accept = "json";
  std::string label;
  bool gzip = false;
  int clients = 8;
  double duration = 20;
  std::vector<std::string> pids;
  int setup_pods = 0, setup_nodes = 100;
  std::string namespace_ = "kf-bench";
};

// What one client thread saw.
struct ClientTotals {
  tools::LatencyHistogram latency;
  uint64_t requests = 0, errors = 0, bytes = 0;
  std::map<int, uint64_t> by_status;
};

// SIGTERM or SIGINT ends the run early (the requests under way finish) and the numbers are
// printed: run-fanout-bench runs LISTs beside a fan-out run until that run ends.
std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop.store(true); }

constexpr const char* kProtobufAccept = "application/vnd.kubernetes.protobuf,application/json";

int Setup(const Flags& f, const tools::Endpoint& api, const std::string& token) {
  tools::Churn::Options o = BenchChurnOptions();  // The fan-out benchmark's objects.
  o.namespace_ = f.namespace_;
  o.pods = f.setup_pods;
  o.nodes = f.setup_nodes;
  o.slices = 0;
  tools::Churn churn(api, token, o);
  if (absl::Status s = churn.Setup(); !s.ok()) {
    std::fprintf(stderr, "kf_list_bench: setup: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "kf_list_bench: %d pods on %d nodes in %s\n", f.setup_pods, f.setup_nodes,
               f.namespace_.c_str());
  return 0;
}

int Run(const Flags& f, const tools::Endpoint& target, const std::string& token) {
  std::map<std::string, pid_t> pids;
  for (const std::string& p : f.pids) {
    std::vector<std::string> kv = absl::StrSplit(ToAbsl(p), absl::MaxSplits('=', 1));
    int pid = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &pid)) {
      std::fprintf(stderr, "kf_list_bench: --pid wants NAME=PID, got %s\n", p.c_str());
      return 2;
    }
    pids[kv[0]] = pid;
  }
  std::map<std::string, ProcSample> before;
  for (const auto& [name, pid] : pids) {
    if (auto s = ReadProc(pid)) before[name] = *s;
  }

  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::vector<ClientTotals> totals(static_cast<size_t>(f.clients));
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(f.duration));
  std::vector<std::thread> threads;
  for (int c = 0; c < f.clients; ++c) {
    threads.emplace_back([&, c] {
      ClientTotals& t = totals[static_cast<size_t>(c)];
      tools::ApiClient client(target, token);
      client.SetHeader(http::field::accept,
                       f.accept == "protobuf" ? kProtobufAccept : "application/json");
      if (f.gzip) client.SetHeader(http::field::accept_encoding, "gzip");
      while (Clock::now() < deadline && !g_stop.load()) {
        const auto t0 = Clock::now();
        auto r = client.Request(http::verb::get, f.path, nullptr, "", std::chrono::seconds(60));
        const auto t1 = Clock::now();
        ++t.requests;
        if (!r.ok()) {
          ++t.errors;
          continue;
        }
        ++t.by_status[r->status];
        t.bytes += r->body.size();
        t.latency.RecordNanos(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  ClientTotals all;
  for (const ClientTotals& t : totals) {
    all.latency.Merge(t.latency);
    all.requests += t.requests;
    all.errors += t.errors;
    all.bytes += t.bytes;
    for (const auto& [status, n] : t.by_status) all.by_status[status] += n;
  }
  const uint64_t answered = all.requests - all.errors;
  auto ms = [](uint64_t us) { return static_cast<double>(us) / 1000.0; };
  std::printf("| %s | %s | %d clients | %.1f s |\n", f.label.c_str(), f.path.c_str(), f.clients,
              elapsed);
  std::printf(
      "requests %lu (errors %lu), %.1f/s; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; "
      "%.0f bytes per answer\n",
      static_cast<unsigned long>(all.requests), static_cast<unsigned long>(all.errors),
      static_cast<double>(answered) / elapsed, ms(all.latency.PercentileMicros(0.5)),
      ms(all.latency.PercentileMicros(0.99)), ms(all.latency.max_us()),
      answered ? static_cast<double>(all.bytes) / static_cast<double>(answered) : 0.0);
  std::string statuses;
  for (const auto& [status, n] : all.by_status) absl::StrAppend(&statuses, status, ":", n, ",");
  if (!statuses.empty()) statuses.pop_back();
  std::string cpu;
  for (const auto& [name, pid] : pids) {
    auto after = ReadProc(pid);
    auto b = before.find(name);
    if (!after || b == before.end() || answered == 0) continue;
    const double used = after->cpu_seconds - b->second.cpu_seconds;
    std::printf("%s: %.2f s CPU, %.2f ms per answered request, peak-ish RSS %.0f MiB\n",
                name.c_str(), used, used * 1000.0 / static_cast<double>(answered),
                static_cast<double>(after->rss_kib) / 1024.0);
    absl::StrAppend(&cpu, " cpu_ms_per_request_", name, "=",
                    absl::StrFormat("%.3f", used * 1000.0 / static_cast<double>(answered)),
                    " rss_mib_", name, "=", after->rss_kib / 1024);
  }
  std::printf(
      "RESULT_LIST label=%s clients=%d seconds=%.1f requests=%lu errors=%lu statuses=%s rps=%.2f "
      "p50_ms=%.1f p99_ms=%.1f max_ms=%.1f bytes_per_answer=%.0f%s\n",
      f.label.c_str(), f.clients, elapsed, static_cast<unsigned long>(all.requests),
      static_cast<unsigned long>(all.errors), statuses.empty() ? "none" : statuses.c_str(),
      static_cast<double>(answered) / elapsed, ms(all.latency.PercentileMicros(0.5)),
      ms(all.latency.PercentileMicros(0.99)), ms(all.latency.max_us()),
      answered ? static_cast<double>(all.bytes) / static_cast<double>(answered) : 0.0, cpu.c_str());
  std::fflush(stdout);
  return answered > 0 ? 0 : 1;
}

}  // namespace
}  // namespace kf::bench

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // A server that went away is an error to count, not a crash.
  using kf::bench::Flags;
  namespace po = boost::program_options;
  Flags f;
  po::options_description d("Flags", 100, 50);
  // clang-format off
  d.add_options()
    ("help,h", "This text.")
    ("target", po::value(&f.target)->value_name("URL"),
     "Where the LISTs go: http://IP:PORT (kube-fanout's plain listener) or https://HOST:PORT.")
    ("apiserver", po::value(&f.apiserver)->value_name("URL"), "The apiserver (for --setup-pods).")
    ("ca-file", po::value(&f.ca_file)->value_name("PATH"), "CA bundle for https targets.")
    ("token-env", po::value(&f.token_env)->default_value(f.token_env),
     "Environment variable holding the bearer token.")
    ("path", po::value(&f.path)->value_name("PATH?QUERY"), "The request, e.g. "
     "/api/v1/namespaces/kf-bench/pods?resourceVersion=0.")
    ("accept", po::value(&f.accept)->default_value(f.accept), "json, or protobuf (client-go's Accept).")
    ("gzip", po::bool_switch(&f.gzip), "Send Accept-Encoding: gzip, as Go's transport does.")
    ("clients", po::value(&f.clients)->default_value(f.clients), "Concurrent clients.")
    ("duration", po::value(&f.duration)->default_value(f.duration), "Seconds to run.")
    ("label", po::value(&f.label)->default_value("run"), "Copied into the output.")
    ("pid", po::value(&f.pids)->composing()->value_name("NAME=PID"),
     "A process whose CPU per request is reported (repeatable).")
    ("setup-pods", po::value(&f.setup_pods)->default_value(0),
     "N > 0: make N pods (the fan-out benchmark's) through --apiserver and exit.")
    ("setup-nodes", po::value(&f.setup_nodes)->default_value(f.setup_nodes), "Nodes for --setup-pods.")
    ("namespace", po::value(&f.namespace_)->default_value(f.namespace_), "Namespace for --setup-pods.");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, d), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kf_list_bench: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "kf_list_bench: many clients LIST one path back to back\n" << d;
    return 0;
  }
  const char* token = std::getenv(f.token_env.c_str());
  const std::string tok = token ? token : "";
  if (f.setup_pods > 0) {
    auto api = kf::tools::Endpoint::Parse(f.apiserver);
    if (!api.ok()) {
      std::fprintf(stderr, "kf_list_bench: --apiserver: %s\n",
                   std::string(api.status().message()).c_str());
      return 2;
    }
    api->ca_file = f.ca_file;
    return kf::bench::Setup(f, *api, tok);
  }
  auto target = kf::tools::Endpoint::Parse(f.target);
  if (!target.ok() || f.path.empty() || f.path[0] != '/' || f.clients < 1 || f.duration <= 0 ||
      (f.accept != "json" && f.accept != "protobuf")) {
    std::fprintf(stderr,
                 "kf_list_bench: need --target=URL, --path=/..., --clients>=1, "
                 "--duration>0, --accept=json|protobuf (see --help)\n");
    return 2;
  }
  target->ca_file = f.ca_file;
  return kf::bench::Run(f, *target, tok);
}
