#include "tests/load/load_churn.h"

#include <time.h>

#include <algorithm>
#include <boost/beast/http/verb.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "tests/bench/open_loop.h"
#include "tests/bench/watch_client.h"
#include "tests/load/wire.h"

namespace kf::load {
namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;
constexpr auto kRequestTimeout = std::chrono::seconds(15);
constexpr size_t kMaxFailureSamples = 5;
constexpr int kMaxWritersPerKind = 8;
constexpr double kWritesPerConnection = 40;  // Per second, well under one connection's capacity.

std::string NodeName(int64_t i) { return absl::StrCat("node-", i); }
std::string PodName(int64_t i) { return absl::StrCat("load-pod-", i); }
std::string ServiceName(int64_t i) { return absl::StrCat("load-svc-", i); }
std::string SliceName(int64_t i) { return absl::StrCat("load-svc-", i, "-slice"); }
std::string ConfigMapName(int64_t i) { return absl::StrCat("lcm-", i); }

std::string NodeJson(int n) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")", NodeName(n),
                      R"(","labels":{"kubernetes.io/hostname":")", NodeName(n), R"("}}})");
}

std::string PodJson(const std::string& ns, int i, int node) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", PodName(i),
                      R"(","namespace":")", ns, R"(","labels":{"app":"kf-load","shard":")", i % 16,
                      R"("}},"spec":{"nodeName":")", NodeName(node),
                      R"(","automountServiceAccountToken":false,"containers":[{"name":"app",)"
                      R"("image":"registry.k8s.io/pause:3.10","ports":[{"containerPort":8080}],)"
                      R"("resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]}})");
}

std::string ServiceJson(const std::string& ns, int i) {
  // No selector: the slices are written here, not by a controller (the rig has none anyway).
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")", ServiceName(i),
                      R"(","namespace":")", ns,
                      R"("},"spec":{"ports":[{"name":"http","port":80,"targetPort":8080,)"
                      R"("protocol":"TCP"}]}})");
}

std::string SliceJson(const std::string& ns, int i, int endpoints, int nodes, std::mt19937& rng) {
  std::string eps;
  for (int k = 0; k < endpoints; ++k) {
    const int host = i * endpoints + k;
    absl::StrAppend(&eps, k ? "," : "", R"({"addresses":["10.)", 128 + host / 65536, ".",
                    (host / 256) % 256, ".", host % 256,
                    R"("],"conditions":{"ready":true,"serving":true,"terminating":false},)"
                    R"("nodeName":")",
                    NodeName(rng() % static_cast<uint32_t>(std::max(1, nodes))),
                    R"(","targetRef":{"kind":"Pod","namespace":")", ns, R"(","name":"backend-)",
                    host, R"("}})");
  }
  return absl::StrCat(
      R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")",
      SliceName(i), R"(","namespace":")", ns, R"(","labels":{"kubernetes.io/service-name":")",
      ServiceName(i),
      R"(","endpointslice.kubernetes.io/managed-by":"kf-load"}},)"
      R"("addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],)"
      R"("endpoints":[)",
      eps, "]}");
}

std::string ConfigMapJson(const std::string& ns, int i) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
                      ConfigMapName(i), R"(","namespace":")", ns,
                      R"("},"data":{"config.yaml":"level: info\n"}})");
}

std::string StampPatch() {
  return absl::StrCat(R"({"metadata":{"annotations":{")", ToAbsl(bench::kWrittenAtAnnotation),
                      R"(":")", bench::UnixNanos(), R"("}}})");
}

std::string Rfc3339Now() {
  const time_t now = time(nullptr);
  tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string EventJson(const std::string& ns, const std::string& name, int pod) {
  const std::string now = Rfc3339Now();
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Event","metadata":{"name":")", name,
                      R"(","namespace":")", ns, R"(","annotations":{")",
                      ToAbsl(bench::kWrittenAtAnnotation), R"(":")", bench::UnixNanos(),
                      R"("}},"involvedObject":{"apiVersion":"v1","kind":"Pod","namespace":")", ns,
                      R"(","name":")", PodName(pod),
                      R"("},"reason":"LoadTest","message":"kf-load churn event","type":"Normal",)"
                      R"("source":{"component":"kf-load"},"firstTimestamp":")",
                      now, R"(","lastTimestamp":")", now, R"(","count":1})");
}

// The resourceVersion in an object's metadata; nullopt if the body is not such an object.
std::optional<uint64_t> ObjectResourceVersion(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  auto meta = doc.FindMember("metadata");
  if (meta == doc.MemberEnd() || !meta->value.IsObject()) return std::nullopt;
  auto rv = meta->value.FindMember("resourceVersion");
  if (rv == meta->value.MemberEnd() || !rv->value.IsString()) return std::nullopt;
  return ParseResourceVersion(std::string_view(rv->value.GetString(), rv->value.GetStringLength()));
}

// The names of a list's items, and for pods their spec.nodeName.
absl::Status ListNames(bench::ApiClient& client, const std::string& path,
                       std::map<std::string, std::string>* out) {
  auto res = client.Request(http::verb::get, path, nullptr, "", std::chrono::seconds(120));
  if (!res.ok()) return res.status();
  if (res->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET ", path, ": HTTP ", res->status, " ", res->body.substr(0, 300)));
  }
  rapidjson::Document doc;
  doc.Parse(res->body.data(), res->body.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("items") ||
      !doc["items"].IsArray()) {
    return absl::UnavailableError(absl::StrCat("GET ", path, ": not a list"));
  }
  for (const auto& item : doc["items"].GetArray()) {
    if (!item.IsObject() || !item.HasMember("metadata") || !item["metadata"].IsObject()) continue;
    const auto& meta = item["metadata"];
    if (!meta.HasMember("name") || !meta["name"].IsString()) continue;
    std::string node;
    if (item.HasMember("spec") && item["spec"].IsObject() && item["spec"].HasMember("nodeName") &&
        item["spec"]["nodeName"].IsString()) {
      node = item["spec"]["nodeName"].GetString();
    }
    (*out)[meta["name"].GetString()] = node;
  }
  return absl::OkStatus();
}

int32_t NodeIndex(const std::string& node_name) {
  int32_t i = -1;
  if (node_name.rfind("node-", 0) != 0 || !absl::SimpleAtoi(node_name.substr(5), &i) || i < 0) {
    return -1;
  }
  return i;
}

}  // namespace

struct LoadChurn::Writer {
  Writer(const bench::Endpoint& e, const std::string& token, Kind k, int i, int of, double r,
         uint32_t seed)
      : client(e, token), kind(k), index(i), count(of), rate(r), rng(seed) {}
  bench::ApiClient client;
  Kind kind;
  int index, count;
  double rate;
  std::mt19937 rng;
  std::thread thread;
  // Written by the writer thread; read after it is joined.
  uint64_t writes = 0, failed = 0, late = 0, sequence = 0;
  bench::LatencyHistogram latency;
  std::vector<std::string> failures;
  std::vector<Write> log;
};

LoadChurn::LoadChurn(bench::Endpoint apiserver, std::string token, Options options)
    : apiserver_(std::move(apiserver)),
      token_(std::move(token)),
      options_(std::move(options)),
      run_id_(bench::UnixNanos() / 1'000'000) {}

LoadChurn::~LoadChurn() { Stop(); }

absl::Status LoadChurn::Setup() {
  const std::string& ns = options_.namespace_;
  struct Item {
    std::string path, body;
  };
  std::mutex mu;
  std::string first_error;
  auto create = [&](bench::ApiClient& client, const Item& item) {
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

  bench::ApiClient client(apiserver_, token_);
  for (const Item& item :
       {Item{"/api/v1/namespaces",
             absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")", ns,
                          R"("}})")},
        Item{absl::StrCat("/api/v1/namespaces/", ns, "/serviceaccounts"),
             R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}})"}}) {
    if (!create(client, item)) return absl::UnavailableError(first_error);
  }

  // What exists already (from an earlier run or mode) is kept; one LIST per kind finds it.
  std::map<std::string, std::string> nodes, existing_pods, services, slices, configmaps;
  const std::string nsp = absl::StrCat("/api/v1/namespaces/", ns);
  for (auto [path, names] :
       {std::pair{std::string("/api/v1/nodes"), &nodes}, std::pair{nsp + "/pods", &existing_pods},
        std::pair{nsp + "/services", &services},
        std::pair{absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", ns, "/endpointslices"),
                  &slices},
        std::pair{nsp + "/configmaps", &configmaps}}) {
    absl::Status s;
    for (int attempt = 0; attempt < 3; ++attempt) {
      s = ListNames(client, path, names);
      if (s.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500 * (attempt + 1)));
    }
    if (!s.ok()) return s;
  }

  std::vector<Item> items;
  for (int n = 0; n < options_.nodes; ++n) {
    if (!nodes.count(NodeName(n))) items.push_back({"/api/v1/nodes", NodeJson(n)});
  }
  for (int i = 0; i < options_.services; ++i) {
    if (!services.count(ServiceName(i))) items.push_back({nsp + "/services", ServiceJson(ns, i)});
  }
  std::mt19937 rng(options_.seed + 7);
  for (int i = 0; i < options_.services; ++i) {
    // Drawn whether or not it is made, so a partial setup continues with the same layout.
    std::string slice = SliceJson(ns, i, options_.endpoints_per_slice, options_.nodes, rng);
    if (!slices.count(SliceName(i))) {
      items.push_back({absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", ns, "/endpointslices"),
                       std::move(slice)});
    }
  }
  for (int i = 0; i < options_.configmaps; ++i) {
    if (!configmaps.count(ConfigMapName(i))) {
      items.push_back({nsp + "/configmaps", ConfigMapJson(ns, i)});
    }
  }
  std::mt19937 pod_rng(options_.seed);
  const int wanted_pods = pods();
  pod_nodes_.assign(static_cast<size_t>(wanted_pods), -1);
  for (int i = 0; i < wanted_pods; ++i) {
    const int drawn =
        static_cast<int>(pod_rng() % static_cast<uint32_t>(std::max(1, options_.nodes)));
    if (auto it = existing_pods.find(PodName(i)); it != existing_pods.end()) {
      // Where it really is: an earlier run may have had other nodes.
      pod_nodes_[static_cast<size_t>(i)] = NodeIndex(it->second);
    } else {
      pod_nodes_[static_cast<size_t>(i)] = drawn;
      items.push_back({nsp + "/pods", PodJson(ns, i, drawn)});
    }
  }

  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options_.setup_connections) && !items.empty(); ++t) {
    threads.emplace_back([&] {
      bench::ApiClient c(apiserver_, token_);
      for (size_t i = next++; i < items.size() && !failed; i = next++) {
        if (!create(c, items[i])) failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) return absl::UnavailableError(first_error);
  return absl::OkStatus();
}

std::string LoadChurn::Target(Kind kind, uint32_t object) const {
  const std::string& ns = options_.namespace_;
  switch (kind) {
    case Kind::kPods:
      return absl::StrCat("/api/v1/namespaces/", ns, "/pods/", PodName(object));
    case Kind::kNodes:
      return absl::StrCat("/api/v1/nodes/", NodeName(object));
    case Kind::kEndpointSlices:
      return absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", ns, "/endpointslices/",
                          SliceName(object));
    case Kind::kConfigMaps:
      return absl::StrCat("/api/v1/namespaces/", ns, "/configmaps/", ConfigMapName(object));
    case Kind::kEvents:
      return absl::StrCat("/api/v1/namespaces/", ns, "/events");
    case Kind::kServices:
      break;
  }
  return "";
}

void LoadChurn::Start() {
  stop_ = false;
  uint32_t seed = options_.seed * 1000 + 17;
  for (Kind kind :
       {Kind::kPods, Kind::kNodes, Kind::kEndpointSlices, Kind::kConfigMaps, Kind::kEvents}) {
    const double rate = options_.rates[static_cast<size_t>(kind)];
    if (rate <= 0) continue;
    const int writers =
        std::clamp(static_cast<int>(std::ceil(rate / kWritesPerConnection)), 1, kMaxWritersPerKind);
    for (int k = 0; k < writers; ++k) {
      writers_.push_back(
          std::make_unique<Writer>(apiserver_, token_, kind, k, writers, rate, seed++));
    }
  }
  started_ = Clock::now();
  for (auto& w : writers_) {
    Writer* writer = w.get();
    writer->thread = std::thread([this, writer] { RunWriter(*writer); });
  }
}

void LoadChurn::Stop() {
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

void LoadChurn::RunWriter(Writer& w) {
  bench::OpenLoop loop(started_, w.index, w.count, w.rate);  // As the bench's churn.
  uint32_t objects = 0;
  switch (w.kind) {
    case Kind::kPods:
    case Kind::kEvents:
      objects = static_cast<uint32_t>(pods());
      break;
    case Kind::kNodes:
      objects = static_cast<uint32_t>(options_.nodes);
      break;
    case Kind::kEndpointSlices:
      objects = static_cast<uint32_t>(options_.services);
      break;
    case Kind::kConfigMaps:
      objects = static_cast<uint32_t>(options_.configmaps);
      break;
    case Kind::kServices:
      break;
  }
  if (objects == 0) return;
  const bool post = w.kind == Kind::kEvents;
  while (loop.Next(stop_, &w.late)) {
    const uint32_t object = w.rng() % objects;
    const std::string target = Target(w.kind, object);
    std::function<std::string()> body;
    if (post) {
      const std::string name = absl::StrCat("load-evt-", run_id_, "-", w.index, "-", w.sequence);
      body = [this, name, object] {
        return EventJson(options_.namespace_, name, static_cast<int>(object));
      };
    } else {
      body = StampPatch;
    }
    ++w.sequence;
    const auto sent = Clock::now();
    auto res = w.client.Request(post ? http::verb::post : http::verb::patch, target, body,
                                post ? "application/json" : "application/merge-patch+json",
                                kRequestTimeout);
    w.latency.RecordNanos(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count());
    const int want = post ? 201 : 200;
    std::optional<uint64_t> rv;
    if (res.ok() && res->status == want) rv = ObjectResourceVersion(res->body);
    if (rv) {
      ++w.writes;
      writes_so_far_.fetch_add(1, std::memory_order_relaxed);
      w.log.push_back(Write{w.kind, post ? static_cast<uint32_t>(w.sequence) : object, *rv});
    } else {
      ++w.failed;
      if (w.failures.size() < kMaxFailureSamples) {
        w.failures.push_back(res.ok() ? absl::StrCat(post ? "POST " : "PATCH ", target, ": HTTP ",
                                                     res->status, " ", res->body.substr(0, 200))
                                      : std::string(res.status().message()));
      }
    }
  }
}

LoadChurn::Stats LoadChurn::GetStats() const {
  Stats s;
  for (const auto& w : writers_) {
    s.writes[static_cast<size_t>(w->kind)] += w->writes;
    s.failed += w->failed;
    s.late += w->late;
    s.write_latency.Merge(w->latency);
    for (const auto& f : w->failures) {
      if (s.failure_samples.size() < kMaxFailureSamples) s.failure_samples.push_back(f);
    }
    s.log.insert(s.log.end(), w->log.begin(), w->log.end());
  }
  s.elapsed = std::chrono::duration<double>(stopped_ - started_).count();
  return s;
}

}  // namespace kf::load
