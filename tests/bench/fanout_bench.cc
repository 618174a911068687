// kf_fanout_bench: the fan-out benchmark of the watch-cache milestone. Drives N watchers through
// kube-fanout (half pods-by-node, half all EndpointSlices) while a churn of writes goes to the
// apiserver, and prints what it cost: upstream watches per resource, delivery latency from the
// write to the watcher, kube-fanout's RSS per watcher and CPU per delivered event.
//
// A command that prints numbers, not a test: tests/bench/run-fanout-bench starts the control
// plane and kube-fanout and runs it (docs/benchmarks.md). This file: flags, limits, main.
#include <sys/resource.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "tests/bench/bench_report.h"
#include "tests/bench/bench_run.h"
#include "tests/bench/process_limits.h"
#include "tests/tools/api_client.h"

namespace kf::bench {
namespace {

namespace po = boost::program_options;
using std::chrono::seconds;

po::options_description Describe(BenchFlags* f) {
  po::options_description d("Flags", 100, 50);
  // clang-format off
  d.add_options()
    ("mode", po::value(&f->mode)->default_value("run"),
     "run: the whole benchmark. apiserver-watches: print the apiserver's open WATCH requests "
     "for pods and endpointslices as pods=N,endpointslices=M and exit.")
    ("proxy", po::value(&f->proxy)->value_name("IP:PORT"), "kube-fanout's plain-HTTP listener.")
    ("apiserver", po::value(&f->apiserver)->value_name("URL"), "The apiserver, https://HOST:PORT.")
    ("ca-file", po::value(&f->ca_file)->value_name("PATH"), "CA bundle for the apiserver.")
    ("token-env", po::value(&f->token_env)->default_value("KF_ADMIN_TOKEN"),
     "Environment variable holding the bearer token used for everything (an admin's).")
    ("kube-fanout-pid", po::value(&f->kube_fanout_pid)->value_name("PID"),
     "kube-fanout's pid: its RSS, CPU and threads are read from /proc.")
    ("pid", po::value(&f->pids)->composing()->value_name("NAME=PID"),
     "Another process whose CPU during the churn is reported (repeatable).")
    ("watchers", po::value(&f->watchers)->default_value(10000),
     "Watch connections: even ones pods-by-node, odd ones all EndpointSlices.")
    ("watch-order", po::value(&f->watch_order)->default_value("shuffled"),
     "Order in which the two kinds of watchers connect: shuffled (seeded) or alternate "
     "(pods, slices, pods, ...).")
    ("ramp-rate", po::value(&f->ramp_rate)->default_value(500), "Watchers opened per second.")
    ("client-threads", po::value(&f->client_threads)->default_value(1), "Threads reading the watchers.")
    ("http2-streams-per-connection", po::value(&f->streams_per_connection)->default_value(0),
     "0: HTTP/1.1, a connection per watcher. N: HTTP/2 with prior knowledge, N consecutive "
     "watchers (an agent's watches) multiplexed on one connection.")
    ("tls-proxy", po::value(&f->tls_proxy)->value_name("IP:PORT"),
     "kube-fanout's TLS listener: the watchers connect there over TLS (the server verified "
     "with --ca-file; HTTP/2 by ALPN), instead of to --proxy.")
    ("source-ips", po::value(&f->source_ips)->default_value(0),
     "Spread the connections over 127.0.0.1..N (0: one address per 25,000 connections).")
    ("wire", po::value(&f->wire)->default_value("json"),
     "What the watchers ask for: json, or protobuf (client-go's Accept for kubelet and "
     "kube-proxy).")
    ("duration", po::value(&f->duration)->default_value(60), "Seconds of churn.")
    ("stop-kube-fanout", po::value(&f->stop_kube_fanout)->default_value(0),
     "Stop kube-fanout (SIGSTOP) for this many seconds halfway through the churn, then let it go "
     "on (SIGCONT): every event must still arrive. Needs --kube-fanout-pid.")
    ("hold-before-churn", po::value(&f->hold_before_churn)->default_value(0),
     "Seconds to wait with every watcher open and idle (after its RSS sample) before the churn.")
    ("settle-max", po::value(&f->settle_max)->default_value(120),
     "At most this many seconds for the initial events to drain after the ramp.")
    ("sample-interval", po::value(&f->sample_interval)->default_value(5),
     "Seconds between the timeline's samples during the churn.")
    ("nodes", po::value(&f->churn.nodes)->default_value(1000), "Nodes node-0..node-K-1.")
    ("pods", po::value(&f->churn.pods)->default_value(2000), "Pods, bound to random nodes.")
    ("slices", po::value(&f->churn.slices)->default_value(50), "EndpointSlices.")
    ("endpoints-per-slice", po::value(&f->churn.endpoints_per_slice)->default_value(10),
     "Endpoints in each EndpointSlice.")
    ("pod-rate", po::value(&f->churn.rate(tools::Kind::kPods))->default_value(20),
     "Pod writes per second.")
    ("slice-rate", po::value(&f->churn.rate(tools::Kind::kEndpointSlices))->default_value(10),
     "EndpointSlice writes per second.")
    ("writers", po::value(&f->churn.writers_per_kind)->default_value(2),
     "Writer connections per kind, each sending at rate/writers.")
    ("bursts", po::bool_switch(&f->churn.bursts),
     "A kind's writers write at the same instants: bursts of --writers writes at the same "
     "average rate, so watchers fall behind and get several events per write.")
    ("namespace", po::value(&f->churn.namespace_)->default_value("kf-bench"),
     "Namespace of the pods and EndpointSlices.")
    ("seed", po::value(&f->churn.seed)->default_value(1), "Seed for node assignment and write targets.")
    ("skip-setup", po::bool_switch(&f->skip_setup), "The objects exist already.")
    ("baseline-watches", po::value(&f->baseline)->value_name("pods=N,endpointslices=M"),
     "The apiserver's open WATCHes before kube-fanout started (from --mode=apiserver-watches).")
    ("max-runtime", po::value(&f->max_runtime)->default_value(0),
     "Watchdog: exit with status 3 after this many seconds (0: a bound derived from the flags).")
    ("help,h", po::bool_switch(&f->help), "Print this help and exit.");
  // clang-format on
  return d;
}

int PrintApiserverWatches(const tools::Endpoint& api, const std::string& token) {
  tools::ApiClient client(api, token);
  auto res = client.Get("/metrics");
  if (!res.ok() || res->status != 200) {
    std::fprintf(stderr, "kf_fanout_bench: cannot read the apiserver's /metrics\n");
    return 1;
  }
  std::printf("pods=%.0f,endpointslices=%.0f\n", ApiserverWatches(res->body, "pods"),
              ApiserverWatches(res->body, "endpointslices"));
  return 0;
}

int Main(int argc, char** argv) {
  BenchFlags flags;
  po::options_description desc = Describe(&flags);
  po::variables_map vm;
  try {  // program_options reports bad flags only by throwing.
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "kf_fanout_bench: %s\nRun 'kf_fanout_bench --help' for usage.\n",
                 e.what());
    return 2;
  }
  if (flags.help) {
    std::cout << "Usage: kf_fanout_bench --proxy=IP:PORT --apiserver=URL --ca-file=PATH [flags]\n\n"
                 "The watch-cache fan-out benchmark; normally run by tests/bench/run-fanout-bench\n"
                 "(see docs/benchmarks.md). The bearer token is read from $KF_ADMIN_TOKEN.\n\n"
              << desc << "\n";
    return 0;
  }
  const char* token = std::getenv(flags.token_env.c_str());
  if (token == nullptr || *token == '\0') {
    std::fprintf(stderr, "kf_fanout_bench: $%s is not set\n", flags.token_env.c_str());
    return 2;
  }
  auto api = tools::Endpoint::Parse(flags.apiserver);
  if (!api.ok()) {
    std::fprintf(stderr, "kf_fanout_bench: --apiserver: %s\n",
                 std::string(api.status().message()).c_str());
    return 2;
  }
  api->ca_file = flags.ca_file;
  if (flags.mode == "apiserver-watches") return PrintApiserverWatches(*api, token);
  auto proxy = tools::Endpoint::Parse(flags.proxy);
  if (flags.mode != "run" || !proxy.ok() || proxy->tls || flags.watchers < 2 ||
      flags.churn.nodes < 1 || flags.churn.pods < 1 || flags.churn.slices < 1 ||
      flags.ramp_rate <= 0 || flags.duration < 1 || flags.client_threads < 1 ||
      flags.churn.writers_per_kind < 1 ||
      (flags.watch_order != "shuffled" && flags.watch_order != "alternate")) {
    std::fprintf(
        stderr,
        "kf_fanout_bench: need --mode=run|apiserver-watches, --proxy=IP:PORT (plain HTTP), "
        "--watchers>=2, --nodes, --pods, --slices, --client-threads, --writers >=1, "
        "--ramp-rate>0, --duration>=1, --watch-order=shuffled|alternate\n");
    return 2;
  }
  // A socket per connection: a watcher's over HTTP/1.1, N watchers' over HTTP/2.
  const int per_connection = std::max(1, flags.streams_per_connection);
  const rlim_t need =
      static_cast<rlim_t>((flags.watchers + per_connection - 1) / per_connection) + 1024;
  if (const rlim_t got = RaiseNoFile(need); got < need) {
    std::fprintf(stderr,
                 "kf_fanout_bench: need %lu file descriptors but the limit is %lu: raise "
                 "`ulimit -Hn`\n",
                 static_cast<unsigned long>(need), static_cast<unsigned long>(got));
    return 1;
  }
  const int bound = flags.max_runtime > 0
                        ? flags.max_runtime
                        : 600 + static_cast<int>(flags.watchers / flags.ramp_rate) +
                              2 * flags.duration + flags.settle_max;
  Watchdog watchdog("kf_fanout_bench", seconds(bound));
  BenchRun run(flags, *api, *proxy, token);
  if (run.Run() != 0) return 1;
  Summarize(run.record()).Print(stdout);
  return 0;
}

}  // namespace
}  // namespace kf::bench

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // A server that went away is an error to count, not a crash.
  return kf::bench::Main(argc, argv);
}
