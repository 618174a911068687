// CachedResources: the resources kube-fanout serves from its cache, each a Cacher fed by a
// Reflector. Built from --cache-resources ("pods", "endpointslices.discovery.k8s.io/v1",
// "widgets.example.com/v1", ...); kind and scope come from the upstream's discovery. Started on
// one io thread; looked up from any thread (immutable after Start's discovery).
#ifndef KUBE_FANOUT_SYNC_CACHED_RESOURCES_H_
#define KUBE_FANOUT_SYNC_CACHED_RESOURCES_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/cacher.h"
#include "common/api/request_info.h"
#include "common/log.h"
#include "proxy/sync/reflector.h"
#include "proxy/sync/self_check.h"
#include "proxy/sync/snapshot_store.h"

namespace kf {

struct ResourceSpec {
  std::string group;
  std::string version;
  std::string resource;
  // "pods" → core v1; "endpointslices.discovery.k8s.io/v1"; "deployments.apps/v1".
  static absl::StatusOr<ResourceSpec> Parse(std::string_view text);
  // Each of `texts` (surrounding blanks ignored), in order; the first bad one's error.
  static absl::StatusOr<std::vector<ResourceSpec>> ParseList(const std::vector<std::string>& texts);
};

// The default set: pods, nodes, services, namespaces, configmaps, endpointslices, events in both
// core v1 and events.k8s.io/v1, and the other kinds node agents watch: csidrivers,
// runtimeclasses, servicecidrs.
std::vector<std::string> DefaultCachedResources();

class CachedResources {
 public:
  struct Entry {
    std::unique_ptr<Cacher> cacher;  // JSON: always running.
    std::unique_ptr<Reflector> reflector;
    // Protobuf, for built-in resources (null for others): a second upstream LIST + WATCH in
    // protobuf, started by the first request that asks for protobuf (UseProtobuf), so a
    // JSON-only fleet costs nothing extra.
    std::unique_ptr<Cacher> proto_cacher;
    std::unique_ptr<Reflector> proto_reflector;
    mutable std::atomic<bool> proto_started{false};
  };

  CachedResources(std::vector<ResourceSpec> specs, EventRingLimits limits, const Logger& log);

  // Warm restart (before Start): resources with a valid snapshot taken from `upstream` (or,
  // for Events, `events_upstream`) are served from it at once, skip discovery and their first
  // LIST, and watch from its RV; all are written back while running.
  void UseSnapshots(std::unique_ptr<SnapshotStore> store, std::string upstream,
                    std::string events_upstream);
  const SnapshotStore* snapshots() const { return snapshots_.get(); }
  // --upstream-watch-idle-timeout for every reflector (before Start).
  void SetWatchIdleTimeout(std::chrono::milliseconds t) { watch_idle_timeout_ = t; }
  // --protobuf-cache-resources (before Start): resources whose protobuf cache starts with the
  // JSON one, so it holds the same window of history from the start; the others' start at their
  // first protobuf request (UseProtobuf).
  void SetProtobufAtStart(std::vector<ResourceSpec> specs) { proto_at_start_ = std::move(specs); }
  // --cache-check-interval (before Start): each cache compared with the upstream's list at its
  // resourceVersion about this often (SelfCheck); zero: never.
  void SetSelfCheckInterval(std::chrono::milliseconds interval) { check_interval_ = interval; }

  // Discovers each resource's kind and scope, then runs its reflector, all on `ioc` with
  // `pool` (kube-fanout's own identity).
  // `events_pool`: where Events' reflectors list and watch (the same pool, or the events
  // upstream's).
  void Start(asio::io_context& ioc, UpstreamPool& pool, UpstreamPool& events_pool,
             std::function<std::string()> credentials);
  void Stop();

  // The cache serving `info`'s group/version/resource, if any (nullptr otherwise).
  const Entry* Find(const RequestInfo& info) const;
  // The entry's protobuf cache, started on first use (its reflector then runs on the
  // reflectors' thread); nullptr when the resource has none. Until it has synced, callers pass
  // requests through. Any thread.
  Cacher* UseProtobuf(const Entry& entry) const;
  bool AllSynced() const;
  const std::vector<std::unique_ptr<Entry>>& entries() const { return entries_; }
  bool started() const { return started_.load(); }
  // Started and not yet serving: its snapshots being read or its resources discovered.
  bool starting() const { return ioc_ != nullptr && !started_.load() && !stopping_.load(); }
  // Whether `info` names one of the resources it was asked to cache (known before it starts).
  bool Covers(const RequestInfo& info) const;

 private:
  std::unique_ptr<Entry> MakeEntry(const ResourceType& type, UpstreamPool& pool,
                                   std::function<std::string()> cred,
                                   const asio::any_io_executor& executor) const;
  // A protobuf cache's snapshot installed in `e` (its cache then synced, its reflector to be
  // started with the JSON one's): when it was in use before the restart, its clients resume.
  void RestoreProtobuf(Entry& e, std::optional<SnapshotStore::Loaded>& restored) const;
  // The entry's caches for the snapshot writer (from the events upstream when `events`).
  void AddSnapshotTargets(const Entry& e, bool events,
                          std::vector<SnapshotStore::Target>* targets) const;
  // The snapshots of every resource (restored_, restored_proto_), on the cache's own thread so
  // the listeners serve meanwhile: a large one takes seconds to read.
  void LoadSnapshots();
  asio::awaitable<void> DiscoverAndRun(UpstreamPool& pool, std::function<std::string()> cred);
  // `spec`'s kind and scope from the upstream's discovery, asked until it answers (nullopt:
  // not served there, logged; or stopped meanwhile).
  asio::awaitable<std::optional<ResourceType>> Discover(UpstreamPool& pool,
                                                        const std::function<std::string()>& cred,
                                                        const ResourceSpec& spec);
  // An entry serving a snapshot's state (an empty one when the state does not import).
  std::unique_ptr<Entry> Restore(SnapshotStore::Loaded& loaded, UpstreamPool& pool,
                                 const std::function<std::string()>& cred,
                                 const asio::any_io_executor& executor) const;
  // Every entry's reflector, and the protobuf one's where it is in use (restored) or asked for at
  // start (marked started). Called before started_ is set: no request can have started a
  // protobuf cache yet, so none is run twice.
  std::vector<Reflector*> ToRun();
  // Runs `reflectors`, and the self-check when it is on.
  void RunAll(const asio::any_io_executor& executor, const std::vector<Reflector*>& reflectors);
  // The reflectors of every cache in use (the protobuf ones once started), for the self-check.
  std::vector<Reflector*> InUse() const;

  std::vector<ResourceSpec> specs_;
  EventRingLimits limits_;
  const Logger& log_;
  std::vector<std::unique_ptr<Entry>> entries_;  // Fixed once started_ is true.
  // After entries_: its writer thread reads their cachers, so it stops (destroyed) first.
  std::unique_ptr<SnapshotStore> snapshots_;
  std::string snapshot_upstream_, snapshot_events_upstream_;
  std::vector<std::optional<SnapshotStore::Loaded>> restored_;        // Per spec; read once.
  std::vector<std::optional<SnapshotStore::Loaded>> restored_proto_;  // Protobuf caches, same.
  std::vector<ResourceSpec> proto_at_start_;
  std::chrono::milliseconds watch_idle_timeout_ = kDefaultWatchIdleTimeout;
  std::chrono::milliseconds check_interval_{0};
  std::unique_ptr<SelfCheck> self_check_;  // Set by RunAll on the cache's thread.
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  asio::io_context* ioc_ = nullptr;
  UpstreamPool* events_pool_ = nullptr;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_CACHED_RESOURCES_H_
