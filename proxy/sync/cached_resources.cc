#include "proxy/sync/cached_resources.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/api/json.h"
#include "common/strings.h"
#include "proxy/upstream/upstream_client.h"
#include "rapidjson/document.h"

namespace kf {

absl::StatusOr<ResourceSpec> ResourceSpec::Parse(std::string_view text) {
  ResourceSpec s;
  std::string_view rest = text;
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    s.version = std::string(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
  }
  const size_t dot = rest.find('.');
  s.resource = std::string(rest.substr(0, dot));
  if (dot != std::string_view::npos) s.group = std::string(rest.substr(dot + 1));
  if (s.version.empty()) {
    if (!s.group.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cached resource \"", ToAbsl(text),
                                                     "\" needs a version: RESOURCE.GROUP/VERSION"));
    }
    s.version = "v1";
  }
  if (s.resource.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("bad cached resource \"", ToAbsl(text), "\""));
  }
  return s;
}

absl::StatusOr<std::vector<ResourceSpec>> ResourceSpec::ParseList(
    const std::vector<std::string>& texts) {
  std::vector<ResourceSpec> specs;
  for (const std::string& text : texts) {
    absl::StatusOr<ResourceSpec> spec = Parse(ToStd(absl::StripAsciiWhitespace(text)));
    if (!spec.ok()) return spec.status();
    specs.push_back(*std::move(spec));
  }
  return specs;
}

std::vector<std::string> DefaultCachedResources() {
  return {"pods", "nodes", "services", "namespaces", "configmaps",
          "endpointslices.discovery.k8s.io/v1", "events", "events.events.k8s.io/v1",
          // The rest of what kubelet (CSI drivers, RuntimeClasses) and kube-proxy (ServiceCIDRs)
          // watch in v1.36, so that a node behind kube-fanout holds no watch at the apiserver.
          "csidrivers.storage.k8s.io/v1", "runtimeclasses.node.k8s.io/v1",
          "servicecidrs.networking.k8s.io/v1"};
}

CachedResources::CachedResources(std::vector<ResourceSpec> specs, EventRingLimits limits,
                                 const Logger& log)
    : specs_(std::move(specs)), limits_(limits), log_(log) {}

void CachedResources::UseSnapshots(std::unique_ptr<SnapshotStore> store, std::string upstream,
                                   std::string events_upstream) {
  snapshots_ = std::move(store);
  snapshot_upstream_ = std::move(upstream);
  snapshot_events_upstream_ = std::move(events_upstream);
}

void CachedResources::Start(asio::io_context& ioc, UpstreamPool& pool, UpstreamPool& events_pool,
                            std::function<std::string()> credentials) {
  ioc_ = &ioc;
  events_pool_ = &events_pool;
  asio::co_spawn(ioc, DiscoverAndRun(pool, std::move(credentials)), asio::detached);
}

bool CachedResources::Covers(const RequestInfo& info) const {
  return std::any_of(specs_.begin(), specs_.end(), [&info](const ResourceSpec& s) {
    return s.resource == info.resource && s.group == info.api_group &&
           s.version == info.api_version;
  });
}

void CachedResources::LoadSnapshots() {
  // Read before any upstream contact.
  restored_.resize(specs_.size());
  restored_proto_.resize(specs_.size());
  if (!snapshots_ || !snapshots_->Open()) return;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const ResourceSpec& s = specs_[i];
    const bool events = RequestInfo::IsEventsResource(s.group, s.resource);
    const std::string& upstream = events ? snapshot_events_upstream_ : snapshot_upstream_;
    restored_[i] = snapshots_->Load(s.group, s.version, s.resource, upstream);
    restored_proto_[i] =
        snapshots_->Load(s.group, s.version, s.resource, upstream, Encoding::kProtobuf);
  }
}

void CachedResources::Stop() {
  if (ioc_ == nullptr) return;
  stopping_ = true;
  asio::post(*ioc_, [this] {
    if (self_check_) self_check_->Stop();
    for (auto& e : entries_) {
      e->reflector->Stop();
      if (e->proto_reflector) e->proto_reflector->Stop();
    }
  });
  for (auto& e : entries_) {
    e->cacher->CloseAll();
    if (e->proto_cacher) e->proto_cacher->CloseAll();
  }
  if (snapshots_) snapshots_->Stop();
}

namespace {
constexpr auto kMaxWait = std::chrono::milliseconds(5000);
}  // namespace

std::unique_ptr<CachedResources::Entry> CachedResources::MakeEntry(
    const ResourceType& type, UpstreamPool& pool, std::function<std::string()> cred,
    const asio::any_io_executor& executor) const {
  auto e = std::make_unique<Entry>();
  e->cacher =
      std::make_unique<Cacher>(type, limits_, [] { return std::chrono::steady_clock::now(); });
  e->reflector =
      std::make_unique<Reflector>(*e->cacher, pool, cred, log_, executor, watch_idle_timeout_);
  if (!type.list_items_have_type_meta && type.Fields().ProtoPathsKnown()) {
    e->proto_cacher = std::make_unique<Cacher>(
        type, limits_, [] { return std::chrono::steady_clock::now(); }, Encoding::kProtobuf);
    e->proto_reflector = std::make_unique<Reflector>(*e->proto_cacher, pool, std::move(cred), log_,
                                                     executor, watch_idle_timeout_);
  }
  return e;
}

void CachedResources::RestoreProtobuf(Entry& e,
                                      std::optional<SnapshotStore::Loaded>& restored) const {
  if (!restored) return;
  SnapshotStore::Loaded loaded = *std::move(restored);
  restored.reset();
  const ResourceType& want = e.cacher->type();
  absl::Status s = absl::FailedPreconditionError("the resource has no protobuf cache");
  if (e.proto_cacher &&
      (loaded.type.kind != want.kind || loaded.type.namespaced != want.namespaced)) {
    s = absl::FailedPreconditionError("its kind or scope differs from the JSON cache's");
  } else if (e.proto_cacher) {
    s = e.proto_cacher->ImportState(std::move(loaded.state));
  }
  if (!s.ok()) {
    log_.Warning("cache snapshot not usable", {{"resource", want.GroupResource()},
                                               {"encoding", "protobuf"},
                                               {"error", ToStd(s.message())}});
    return;
  }
  // In use before the restart: runs from the start, as the JSON cache does.
  e.proto_started.store(true);
}

namespace {

// Built-in groups encode list items without type fields; custom resources keep them.
bool BuiltinGroup(std::string_view group) {
  static constexpr std::string_view kBuiltinGroups[] = {"",
                                                        "apps",
                                                        "batch",
                                                        "discovery.k8s.io",
                                                        "events.k8s.io",
                                                        "networking.k8s.io",
                                                        "policy",
                                                        "rbac.authorization.k8s.io",
                                                        "storage.k8s.io",
                                                        "coordination.k8s.io",
                                                        "autoscaling",
                                                        "node.k8s.io",
                                                        "scheduling.k8s.io",
                                                        "admissionregistration.k8s.io",
                                                        "certificates.k8s.io",
                                                        "resource.k8s.io"};
  return std::find(std::begin(kBuiltinGroups), std::end(kBuiltinGroups), group) !=
         std::end(kBuiltinGroups);
}

// `spec`'s kind and scope from its group version's discovery document `body`; nullopt when the
// document does not list the resource.
std::optional<ResourceType> TypeFromDiscovery(const ResourceSpec& spec, std::string_view body) {
  ResourceType type{spec.group, spec.version, spec.resource, "", true, !spec.group.empty()};
  type.list_items_have_type_meta = !BuiltinGroup(type.group);
  rapidjson::Document doc;
  if (!ParseJson(body, doc).ok() || !doc.IsObject() || !doc.HasMember("resources") ||
      !doc["resources"].IsArray()) {
    return std::nullopt;
  }
  bool found = false;
  for (const auto& r : doc["resources"].GetArray()) {
    if (!r.IsObject() || !r.HasMember("name") || !r["name"].IsString() ||
        r["name"].GetString() != spec.resource || !r.HasMember("kind") || !r["kind"].IsString() ||
        !r.HasMember("namespaced") || !r["namespaced"].IsBool()) {
      continue;
    }
    type.kind = r["kind"].GetString();
    type.namespaced = r["namespaced"].GetBool();
    found = true;
  }
  if (!found) return std::nullopt;
  return type;
}

}  // namespace

asio::awaitable<std::optional<ResourceType>> CachedResources::Discover(
    UpstreamPool& pool, const std::function<std::string()>& cred, const ResourceSpec& spec) {
  const std::string path = spec.group.empty()
                               ? absl::StrCat("/api/", spec.version)
                               : absl::StrCat("/apis/", spec.group, "/", spec.version);
  absl::StatusOr<UpstreamResponse> res = absl::UnavailableError("");
  // An unreachable upstream is waited for (readyz stays failing meanwhile); only an answer
  // that the resource is not served excludes it.
  for (auto wait = std::chrono::milliseconds(250);; wait = std::min(wait * 2, kMaxWait)) {
    res = co_await UpstreamCall(pool, http::verb::get, path, cred());
    if (res.ok() && res->status < 500 && res->status != 429) break;
    if (ioc_ == nullptr || stopping_) co_return std::nullopt;
    asio::steady_timer t(co_await asio::this_coro::executor);
    t.expires_after(wait);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  std::optional<ResourceType> type;
  if (res->status == 200) type = TypeFromDiscovery(spec, res->body);
  if (!type) {
    log_.Error("cached resource not served by the upstream; passing it through",
               {{"resource", absl::StrCat(spec.resource, ".", spec.group, "/", spec.version)}});
  }
  co_return type;
}

std::unique_ptr<CachedResources::Entry> CachedResources::Restore(
    SnapshotStore::Loaded& loaded, UpstreamPool& pool, const std::function<std::string()>& cred,
    const asio::any_io_executor& executor) const {
  std::unique_ptr<Entry> entry = MakeEntry(loaded.type, pool, cred, executor);
  if (absl::Status s = entry->cacher->ImportState(std::move(loaded.state)); !s.ok()) {
    log_.Warning("cache snapshot not usable",
                 {{"resource", loaded.type.GroupResource()}, {"error", ToStd(s.message())}});
    entry = MakeEntry(loaded.type, pool, cred, executor);
  }
  return entry;
}

asio::awaitable<void> CachedResources::DiscoverAndRun(UpstreamPool& pool,
                                                      std::function<std::string()> cred) {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  LoadSnapshots();
  std::vector<std::unique_ptr<Entry>> entries;
  std::vector<SnapshotStore::Target> targets;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const ResourceSpec& spec = specs_[i];
    const bool events = RequestInfo::IsEventsResource(spec.group, spec.resource);
    // Events list and watch from the events upstream when there is one.
    UpstreamPool& own = events ? *events_pool_ : pool;
    if (restored_[i]) {
      // Warm: the snapshot knows the type; its state serves until the watch catches up.
      entries.push_back(Restore(*restored_[i], own, cred, executor));
      restored_[i].reset();
    } else {
      const std::optional<ResourceType> type = co_await Discover(pool, cred, spec);
      if (ioc_ == nullptr || stopping_) co_return;
      if (!type) continue;
      entries.push_back(MakeEntry(*type, own, cred, executor));
    }
    RestoreProtobuf(*entries.back(), restored_proto_[i]);
    AddSnapshotTargets(*entries.back(), events, &targets);
  }
  entries_ = std::move(entries);
  const std::vector<Reflector*> runs = ToRun();  // Before requests can start a protobuf cache.
  started_.store(true);
  if (snapshots_) snapshots_->Start(std::move(targets));
  RunAll(executor, runs);
}

void CachedResources::RunAll(const asio::any_io_executor& executor,
                             const std::vector<Reflector*>& reflectors) {
  for (Reflector* r : reflectors) asio::co_spawn(executor, r->Run(), asio::detached);
  if (check_interval_.count() <= 0 || stopping_) return;
  self_check_ = std::make_unique<SelfCheck>(executor, check_interval_, [this] { return InUse(); });
  asio::co_spawn(executor, self_check_->Run(), asio::detached);
}

std::vector<Reflector*> CachedResources::InUse() const {
  std::vector<Reflector*> out;
  for (const auto& e : entries_) {
    out.push_back(e->reflector.get());
    if (e->proto_reflector && e->proto_started.load()) out.push_back(e->proto_reflector.get());
  }
  return out;
}

std::vector<Reflector*> CachedResources::ToRun() {
  std::vector<Reflector*> runs;
  for (auto& e : entries_) {
    runs.push_back(e->reflector.get());
    const ResourceType& t = e->cacher->type();
    const bool at_start =
        std::any_of(proto_at_start_.begin(), proto_at_start_.end(), [&t](const ResourceSpec& s) {
          return s.group == t.group && s.version == t.version && s.resource == t.resource;
        });
    if (e->proto_reflector && at_start && !e->proto_started.exchange(true)) {
      log_.Info("protobuf cache starting", {{"resource", t.GroupResource()}, {"why", "at start"}});
    }
    if (e->proto_started.load()) runs.push_back(e->proto_reflector.get());
  }
  return runs;
}

void CachedResources::AddSnapshotTargets(const Entry& e, bool events,
                                         std::vector<SnapshotStore::Target>* targets) const {
  const std::string& upstream = events ? snapshot_events_upstream_ : snapshot_upstream_;
  targets->push_back({e.cacher.get(), upstream});
  // Written once it has synced (ExportState is empty before): a protobuf cache nobody started
  // costs nothing.
  if (e.proto_cacher) targets->push_back({e.proto_cacher.get(), upstream});
}

const CachedResources::Entry* CachedResources::Find(const RequestInfo& info) const {
  if (!started_.load()) return nullptr;
  for (const auto& e : entries_) {
    const ResourceType& t = e->cacher->type();
    if (t.resource == info.resource && t.group == info.api_group && t.version == info.api_version) {
      return e.get();
    }
  }
  return nullptr;
}

Cacher* CachedResources::UseProtobuf(const Entry& entry) const {
  if (!entry.proto_cacher) return nullptr;
  if (!entry.proto_started.exchange(true) && !stopping_.load()) {
    log_.Info("protobuf cache starting", {{"resource", entry.cacher->type().GroupResource()}});
    Reflector* reflector = entry.proto_reflector.get();
    asio::post(*ioc_,
               [reflector, ioc = ioc_] { asio::co_spawn(*ioc, reflector->Run(), asio::detached); });
  }
  return entry.proto_cacher.get();
}

bool CachedResources::AllSynced() const {
  if (!started_.load()) return false;
  for (const auto& e : entries_) {
    if (!e->cacher->synced()) return false;
  }
  return true;
}

}  // namespace kf
