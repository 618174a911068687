#include "tests/tools/churn.h"

#include <algorithm>
#include <boost/beast/http/verb.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "tests/tools/open_loop.h"
#include "tests/tools/resource_version.h"
#include "tests/tools/write_stamp.h"

namespace kf::tools {
namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;
constexpr auto kRequestTimeout = std::chrono::seconds(15);
constexpr size_t kMaxFailureSamples = 5;
constexpr int kMaxWritersPerKind = 8;
constexpr double kWritesPerConnection = 40;  // Per second, well under one connection's capacity.

std::string StampPatch() {
  return absl::StrCat(R"({"metadata":{"annotations":{")", ToAbsl(kWrittenAtAnnotation), R"(":")",
                      UnixNanos(), R"("}}})");
}

// The names of a list's items, and for pods their spec.nodeName.
absl::Status ListNames(ApiClient& client, const std::string& path,
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

// What exists of each kind, by name (for pods, with their node's name).
absl::Status ListExisting(ApiClient& client, const ChurnObjects& objects,
                          std::map<Kind, std::map<std::string, std::string>>* existing) {
  for (Kind kind :
       {Kind::kNodes, Kind::kPods, Kind::kServices, Kind::kEndpointSlices, Kind::kConfigMaps}) {
    absl::Status s;
    for (int attempt = 0; attempt < 3; ++attempt) {
      s = ListNames(client, objects.Collection(kind), &(*existing)[kind]);
      if (s.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500 * (attempt + 1)));
    }
    if (!s.ok()) return s;
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

// POSTs that create objects, from a few connections at once; an object that exists already
// (409) counts as made. Each has at most three attempts; the first failure is kept.
class Creator {
 public:
  struct Item {
    std::string path, body;
  };

  Creator(const Endpoint& apiserver, const std::string& token)
      : apiserver_(apiserver), token_(token) {}

  bool Create(ApiClient& client, const Item& item) {
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
    std::lock_guard lock(mu_);
    if (first_error_.empty()) first_error_ = absl::StrCat("POST ", item.path, ": ", last);
    return false;
  }

  absl::Status CreateAll(const std::vector<Item>& items, int connections) {
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < std::max(1, connections) && !items.empty(); ++t) {
      threads.emplace_back([&] {
        ApiClient client(apiserver_, token_);
        for (size_t i = next++; i < items.size() && !failed; i = next++) {
          if (!Create(client, items[i])) failed = true;
        }
      });
    }
    for (auto& t : threads) t.join();
    return failed ? Error() : absl::OkStatus();
  }

  absl::Status Error() {
    std::lock_guard lock(mu_);
    return absl::UnavailableError(first_error_);
  }

 private:
  const Endpoint& apiserver_;
  const std::string& token_;
  std::mutex mu_;
  std::string first_error_;
};

}  // namespace

struct Churn::Writer {
  Writer(const Endpoint& e, const std::string& token, Kind k, int i, int of, double r, uint32_t s)
      : client(e, token), kind(k), index(i), count(of), rate(r), seed(s), rng(s) {}
  ApiClient client;
  Kind kind;
  int index, count;
  double rate;
  uint32_t seed;
  std::mt19937 rng;
  std::thread thread;
  // Written by the writer thread; read after it is joined.
  uint64_t writes = 0, failed = 0, late = 0, sequence = 0;
  LatencyHistogram latency;
  std::vector<std::string> failures;
  std::vector<Write> log;
};

Churn::Churn(Endpoint apiserver, std::string token, Options options)
    : apiserver_(std::move(apiserver)),
      token_(std::move(token)),
      options_(std::move(options)),
      objects_({options_.namespace_, options_.prefix, options_.manager, options_.address_octet}),
      run_id_(UnixNanos() / 1'000'000) {
  std::mt19937 pod_rng(options_.seed);
  for (int i = 0; i < options_.pods; ++i) {
    const auto random =
        static_cast<int32_t>(pod_rng() % static_cast<uint32_t>(std::max(1, options_.nodes)));
    pod_nodes_.push_back(options_.pod_configmap_volumes > 0 && i < options_.nodes ? i : random);
  }
}

Churn::~Churn() { Stop(); }

absl::Status Churn::Setup() {
  const std::string& ns = options_.namespace_;
  using Item = Creator::Item;
  Creator creator(apiserver_, token_);
  ApiClient client(apiserver_, token_);
  for (const Item& item :
       {Item{"/api/v1/namespaces",
             absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")", ns,
                          R"("}})")},
        Item{absl::StrCat("/api/v1/namespaces/", ns, "/serviceaccounts"),
             R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}})"}}) {
    if (!creator.Create(client, item)) return creator.Error();
  }

  // What exists already (from an earlier run or mode) is kept.
  std::map<Kind, std::map<std::string, std::string>> existing;
  if (options_.keep_existing) {
    if (absl::Status s = ListExisting(client, objects_, &existing); !s.ok()) return s;
  }
  auto exists = [&existing](Kind kind, const std::string& name) {
    return existing[kind].count(name) > 0;
  };

  std::vector<Item> items;
  for (int n = 0; n < options_.nodes; ++n) {
    if (!exists(Kind::kNodes, ChurnObjects::NodeName(n))) {
      items.push_back({objects_.Collection(Kind::kNodes), ChurnObjects::NodeJson(n)});
    }
  }
  for (int i = 0; i < options_.slices && options_.services; ++i) {
    if (!exists(Kind::kServices, objects_.ServiceName(i))) {
      items.push_back({objects_.Collection(Kind::kServices), objects_.ServiceJson(i)});
    }
  }
  std::mt19937 rng(options_.seed + 7);
  for (int i = 0; i < options_.slices; ++i) {
    // Drawn whether or not it is made, so a partial setup continues with the same layout.
    std::string slice = objects_.SliceJson(i, options_.endpoints_per_slice, options_.nodes, rng);
    if (!exists(Kind::kEndpointSlices, objects_.SliceName(i))) {
      items.push_back({objects_.Collection(Kind::kEndpointSlices), std::move(slice)});
    }
  }
  for (int i = 0; i < options_.configmaps; ++i) {
    if (!exists(Kind::kConfigMaps, ChurnObjects::ConfigMapName(i))) {
      items.push_back({objects_.Collection(Kind::kConfigMaps), objects_.ConfigMapJson(i)});
    }
  }
  const std::map<std::string, std::string>& existing_pods = existing[Kind::kPods];
  for (int i = 0; i < options_.pods; ++i) {
    const auto p = static_cast<size_t>(i);
    if (auto it = existing_pods.find(objects_.PodName(i)); it != existing_pods.end()) {
      // Where it really is: an earlier run may have had other nodes.
      pod_nodes_[p] = NodeIndex(it->second);
    } else {
      items.push_back({objects_.Collection(Kind::kPods),
                       objects_.PodJson(i, pod_nodes_[p], options_.pod_configmap_volumes)});
    }
  }
  return creator.CreateAll(items, options_.setup_connections);
}

uint32_t Churn::Objects(Kind kind) const {
  switch (kind) {
    case Kind::kPods:
    case Kind::kEvents:  // Each about a random pod.
      return static_cast<uint32_t>(std::max(0, options_.pods));
    case Kind::kNodes:
      return static_cast<uint32_t>(std::max(0, options_.nodes));
    case Kind::kEndpointSlices:
      return static_cast<uint32_t>(std::max(0, options_.slices));
    case Kind::kConfigMaps:
      return static_cast<uint32_t>(std::max(0, options_.configmaps));
    case Kind::kServices:
      break;
  }
  return 0;
}

void Churn::Start() {
  stop_ = false;
  uint32_t seed = options_.seed * 1000 + 17;
  for (Kind kind :
       {Kind::kPods, Kind::kNodes, Kind::kEndpointSlices, Kind::kConfigMaps, Kind::kEvents}) {
    const double rate = options_.rate(kind);
    if (rate <= 0) continue;
    const int writers = options_.writers_per_kind > 0
                            ? options_.writers_per_kind
                            : std::clamp(static_cast<int>(std::ceil(rate / kWritesPerConnection)),
                                         1, kMaxWritersPerKind);
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
  // Poisson: the writer's own arrivals, from a seed of its own unlike its targets'.
  OpenLoop loop(started_, options_.bursts ? 0 : w.index, w.count, w.rate,
                options_.poisson ? std::optional<uint32_t>(w.seed ^ 0x5bd1e995u) : std::nullopt);
  const uint32_t objects = Objects(w.kind);
  if (objects == 0) return;
  const bool post = w.kind == Kind::kEvents;
  while (loop.Next(stop_, &w.late)) {
    const uint32_t object = w.rng() % objects;
    const std::string target = objects_.Target(w.kind, object);
    std::function<std::string()> body;
    if (post) {
      const std::string name =
          absl::StrCat(options_.prefix, "-evt-", run_id_, "-", w.index, "-", w.sequence);
      body = [this, name, object] { return objects_.EventJson(name, static_cast<int>(object)); };
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
      writes_so_far_[static_cast<size_t>(w.kind)].fetch_add(1, std::memory_order_relaxed);
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

uint64_t Churn::writes_so_far() const {
  uint64_t n = 0;
  for (const auto& c : writes_so_far_) n += c.load(std::memory_order_relaxed);
  return n;
}

Churn::Stats Churn::GetStats() const {
  Stats s;
  s.pod_writes_per_node.assign(static_cast<size_t>(std::max(0, options_.nodes)), 0);
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
  for (const Write& write : s.log) {
    if (write.kind != Kind::kPods) continue;
    const int32_t node = PodNode(write.object);
    if (node >= 0 && static_cast<size_t>(node) < s.pod_writes_per_node.size()) {
      ++s.pod_writes_per_node[static_cast<size_t>(node)];
    }
  }
  s.elapsed = std::chrono::duration<double>(stopped_ - started_).count();
  return s;
}

}  // namespace kf::tools
