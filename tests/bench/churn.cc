#include "tests/bench/churn.h"

#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "tests/bench/open_loop.h"
#include "tests/bench/watch_client.h"

namespace kf::bench {
namespace {

namespace http = beast::http;
using Clock = std::chrono::steady_clock;
constexpr auto kRequestTimeout = std::chrono::seconds(15);
constexpr size_t kMaxFailureSamples = 5;

std::string NodeJson(int n) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"node-)", n,
                      R"(","labels":{"kubernetes.io/hostname":"node-)", n, R"("}}})");
}

std::string PodJson(const std::string& ns, int i, int node) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"bench-pod-)", i,
                      R"(","namespace":")", ns, R"(","labels":{"app":"kf-bench","shard":")", i % 16,
                      R"("}},"spec":{"nodeName":"node-)", node,
                      R"(","automountServiceAccountToken":false,"containers":[{"name":"app",)"
                      R"("image":"registry.k8s.io/pause:3.10","ports":[{"containerPort":8080}],)"
                      R"("resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]}})");
}

std::string SliceJson(const std::string& ns, int i, int endpoints, int nodes, std::mt19937& rng) {
  std::string eps;
  for (int k = 0; k < endpoints; ++k) {
    const int host = i * endpoints + k;
    absl::StrAppend(&eps, k ? "," : "", R"({"addresses":["10.)", 64 + host / 65536, ".",
                    (host / 256) % 256, ".", host % 256,
                    R"("],"conditions":{"ready":true,"serving":true,"terminating":false},)"
                    R"("nodeName":"node-)",
                    rng() % static_cast<uint32_t>(nodes),
                    R"(","targetRef":{"kind":"Pod","namespace":")", ns, R"(","name":"backend-)",
                    host, R"("}})");
  }
  return absl::StrCat(
      R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"bench-svc-)",
      i, R"(-slice","namespace":")", ns, R"(","labels":{"kubernetes.io/service-name":"bench-svc-)",
      i,
      R"(","endpointslice.kubernetes.io/managed-by":"kf-fanout-bench"}},"addressType":"IPv4",)"
      R"("ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[)",
      eps, "]}");
}

std::string StampPatch() {
  return absl::StrCat(R"({"metadata":{"annotations":{")", std::string(kWrittenAtAnnotation),
                      R"(":")", UnixNanos(), R"("}}})");
}

}  // namespace

struct Churn::Writer {
  Writer(const Endpoint& e, const std::string& token, bool p, int k, int of, double r,
         uint32_t seed)
      : client(e, token), pods(p), index(k), count(of), rate(r), rng(seed) {}
  ApiClient client;
  bool pods;
  int index, count;
  double rate;
  std::mt19937 rng;
  std::thread thread;
  // Written by the writer thread; read after it is joined.
  uint64_t writes = 0, failed = 0, late = 0;
  std::vector<uint64_t> per_node;
  LatencyHistogram latency;
  std::vector<std::string> failures;
};

Churn::Churn(Endpoint apiserver, std::string token, Options options)
    : apiserver_(std::move(apiserver)), token_(std::move(token)), options_(std::move(options)) {
  std::mt19937 rng(options_.seed);
  for (int i = 0; i < options_.pods; ++i) {
    pod_nodes_.push_back(static_cast<int>(rng() % static_cast<uint32_t>(options_.nodes)));
  }
}

Churn::~Churn() { Stop(); }

absl::Status Churn::Setup() {
  const std::string& ns = options_.namespace_;
  struct Item {
    std::string path, body;
  };
  std::vector<Item> first{
      {"/api/v1/namespaces",
       absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")", ns, R"("}})")},
      {absl::StrCat("/api/v1/namespaces/", ns, "/serviceaccounts"),
       R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}})"}};
  std::vector<Item> items;
  for (int n = 0; n < options_.nodes; ++n) items.push_back({"/api/v1/nodes", NodeJson(n)});
  std::mt19937 rng(options_.seed + 7);
  for (int i = 0; i < options_.slices; ++i) {
    items.push_back({absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", ns, "/endpointslices"),
                     SliceJson(ns, i, options_.endpoints_per_slice, options_.nodes, rng)});
  }
  for (int i = 0; i < options_.pods; ++i) {
    items.push_back({absl::StrCat("/api/v1/namespaces/", ns, "/pods"),
                     PodJson(ns, i, pod_nodes_[static_cast<size_t>(i)])});
  }
  std::mutex mu;
  std::string first_error;
  auto create = [&](ApiClient& client, const Item& item) {
    std::string last;
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::function<std::string()> body = [&item] { return item.body; };
      auto res =
          client.Request(http::verb::post, item.path, body, "application/json", kRequestTimeout);
      if (res.ok() && (res->status == 201 || res->status == 409)) return true;
      last = res.ok() ? absl::StrCat("HTTP ", res->status, ": ", res->body.substr(0, 300))
                      : std::string(res.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * (attempt + 1)));
    }
    std::lock_guard lock(mu);
    if (first_error.empty()) first_error = absl::StrCat("POST ", item.path, ": ", last);
    return false;
  };
  {
    ApiClient client(apiserver_, token_);
    for (const Item& item : first) {
      if (!create(client, item)) return absl::UnavailableError(first_error);
    }
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options_.setup_connections); ++t) {
    threads.emplace_back([&] {
      ApiClient client(apiserver_, token_);
      for (size_t i = next++; i < items.size() && !failed; i = next++) {
        if (!create(client, items[i])) failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) return absl::UnavailableError(first_error);
  return absl::OkStatus();
}

void Churn::Start() {
  stop_ = false;
  uint32_t seed = options_.seed * 1000 + 17;
  for (bool pods : {true, false}) {
    const double rate = pods ? options_.pod_rate : options_.slice_rate;
    const int count = pods ? options_.pods : options_.slices;
    if (rate <= 0 || count <= 0) continue;
    for (int k = 0; k < options_.writers_per_kind; ++k) {
      writers_.push_back(std::make_unique<Writer>(apiserver_, token_, pods, k,
                                                  options_.writers_per_kind, rate, seed++));
    }
  }
  started_ = Clock::now();
  for (auto& w : writers_) {
    Writer* writer = w.get();
    writer->thread = std::thread([this, writer] { RunWriter(*writer); });
  }
}

void Churn::Stop() {
  stop_ = true;
  bool any = false;
  for (auto& w : writers_) {
    if (w->thread.joinable()) {
      w->thread.join();
      any = true;
    }
  }
  if (any) stopped_ = Clock::now();
}

void Churn::RunWriter(Writer& w) {
  OpenLoop loop(started_, w.index, w.count, w.rate);
  w.per_node.assign(static_cast<size_t>(options_.nodes), 0);
  const int objects = w.pods ? options_.pods : options_.slices;
  const std::string prefix =
      w.pods ? absl::StrCat("/api/v1/namespaces/", options_.namespace_, "/pods/bench-pod-")
             : absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", options_.namespace_,
                            "/endpointslices/bench-svc-");
  const std::function<std::string()> body = StampPatch;
  while (loop.Next(stop_, &w.late)) {
    const int i = static_cast<int>(w.rng() % static_cast<uint32_t>(objects));
    const std::string target = w.pods ? absl::StrCat(prefix, i) : absl::StrCat(prefix, i, "-slice");
    const auto sent = Clock::now();
    auto res = w.client.Request(http::verb::patch, target, body, "application/merge-patch+json",
                                kRequestTimeout);
    w.latency.RecordNanos(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count());
    if (res.ok() && res->status == 200) {
      ++w.writes;
      (w.pods ? pod_writes_so_far_ : slice_writes_so_far_).fetch_add(1, std::memory_order_relaxed);
      if (w.pods) ++w.per_node[static_cast<size_t>(pod_nodes_[static_cast<size_t>(i)])];
    } else {
      ++w.failed;
      if (w.failures.size() < kMaxFailureSamples) {
        w.failures.push_back(res.ok() ? absl::StrCat("PATCH ", target, ": HTTP ", res->status, " ",
                                                     res->body.substr(0, 200))
                                      : std::string(res.status().message()));
      }
    }
  }
}

Churn::Stats Churn::GetStats() const {
  Stats s;
  s.pod_writes_per_node.assign(static_cast<size_t>(options_.nodes), 0);
  for (const auto& w : writers_) {
    (w->pods ? s.pod_writes : s.slice_writes) += w->writes;
    s.failed += w->failed;
    s.late += w->late;
    for (size_t n = 0; n < w->per_node.size(); ++n) s.pod_writes_per_node[n] += w->per_node[n];
    s.write_latency.Merge(w->latency);
    for (const auto& f : w->failures) {
      if (s.failure_samples.size() < kMaxFailureSamples) s.failure_samples.push_back(f);
    }
  }
  s.elapsed = std::chrono::duration<double>(stopped_ - started_).count();
  return s;
}

}  // namespace kf::bench
