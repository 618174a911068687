// Cacher: the watch cache of one resource. Holds the current objects (a sorted store, as the
// apiserver lists them), the event window, the cache's resourceVersion and the watchers, and
// dispatches each upstream event to the watchers it concerns, applying selector transitions
// (entering a selection → ADDED, leaving → DELETED with the previous state at the event's RV).
//
// Thread-safe: one mutex guards the state. The reflector feeds it; sessions list, get and
// watch from any thread. Watchers are notified after the lock is released.
#ifndef KUBE_FANOUT_CACHE_CACHER_H_
#define KUBE_FANOUT_CACHE_CACHER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache_watcher.h"
#include "cache/cached_object.h"
#include "cache/event_ring.h"
#include "cache/version_digest.h"
#include "cache/watch_event.h"
#include "cache/watcher_index.h"

namespace kf {

class Cacher {
 public:
  using Clock = std::chrono::steady_clock;
  // `encoding`: the form of the objects the reflector feeds (CachedObject::FromJson or
  // FromProtobuf); answers from this cache are in that form.
  Cacher(ResourceType type, EventRingLimits limits, std::function<Clock::time_point()> now,
         Encoding encoding = Encoding::kJson);

  const ResourceType& type() const { return type_; }
  Encoding encoding() const { return encoding_; }

  // --- Reflector side -------------------------------------------------------------------------
  // Installs a full LIST at `list_rv`. The first call makes the cache synced; later calls (a
  // relist after 410) turn the difference into events so open watches continue, and restart
  // the event window at `list_rv`.
  void Replace(std::vector<ObjectPtr> objects, uint64_t list_rv);
  // One upstream watch event (kDeleted: the object as sent, RV = the deletion's).
  void Apply(EventType type, ObjectPtr object);
  // An upstream bookmark: the cache is current up to `rv`.
  void Bookmark(uint64_t rv);
  // One object of a consistent upstream list: its store key and resourceVersion.
  using Listed = KeyVersion;
  // A consistent upstream list of the whole resource at `rv` (every object, e.g. its metadata
  // only): when the store holds exactly those objects at those resourceVersions, the resource
  // had no change between the cache's RV and `rv` that the store lacks, and the cache advances
  // to `rv` without waiting for the upstream's next bookmark. True when the cache is at `rv`
  // or later afterwards. An object created and deleted between the two whose events had not
  // arrived yet is in neither; its late events are then older than the cache and dropped
  // (counted: Stats::events_after_proof).
  bool ProveCurrent(uint64_t rv, const std::vector<Listed>& listed);
  // An upstream bookmark object (any RV; its JSON, or its protobuf message), reused for
  // downstream bookmarks.
  void SetBookmarkTemplate(std::string object);
  // Whether the upstream filters by shardSelector (its ShardedListAndWatch gate), as its
  // answer to the reflector's LIST showed (ListMeta.shardInfo present or not).
  enum class UpstreamSharding : uint8_t { kUnknown, kShards, kIgnores };
  void SetUpstreamSharding(bool shards) {
    upstream_sharding_.store(shards ? UpstreamSharding::kShards : UpstreamSharding::kIgnores,
                             std::memory_order_relaxed);
  }
  UpstreamSharding upstream_sharding() const {
    return upstream_sharding_.load(std::memory_order_relaxed);
  }
  // Whether the upstream answers application/cbor for this resource (its CBORServingAndStorage
  // gate), as its answer to the reflector's probe showed (Reflector::ProbeCbor).
  enum class UpstreamCbor : uint8_t { kUnknown, kServes, kRefuses };
  void SetUpstreamCbor(bool serves) {
    upstream_cbor_.store(serves ? UpstreamCbor::kServes : UpstreamCbor::kRefuses,
                         std::memory_order_relaxed);
  }
  UpstreamCbor upstream_cbor() const { return upstream_cbor_.load(std::memory_order_relaxed); }
  // What the upstream does with an Accept clause's drop= parameter (the managedFields opt-out,
  // Kubernetes 1.38's alpha ManagedFieldsOptOut), as its answers to the reflector's probe showed
  // (Reflector::AskDrop): reads it (drop=metadata.managedFields leaves them out, another target
  // is not acceptable), or ignores it (1.36, the gate off).
  enum class UpstreamDrop : uint8_t { kUnknown, kHonours, kIgnores };
  void SetUpstreamDrop(bool honours) {
    upstream_drop_.store(honours ? UpstreamDrop::kHonours : UpstreamDrop::kIgnores,
                         std::memory_order_relaxed);
  }
  UpstreamDrop upstream_drop() const { return upstream_drop_.load(std::memory_order_relaxed); }
  // Whether the upstream compresses its own WatchList answers for a client accepting gzip (its
  // WatchListCompression gate, Kubernetes 1.37), as its answer to the reflector's probe showed
  // (Reflector::AskWatchListGzip).
  enum class UpstreamWatchListGzip : uint8_t { kUnknown, kCompresses, kPlain };
  void SetUpstreamWatchListGzip(bool compresses) {
    upstream_watchlist_gzip_.store(
        compresses ? UpstreamWatchListGzip::kCompresses : UpstreamWatchListGzip::kPlain,
        std::memory_order_relaxed);
  }
  UpstreamWatchListGzip upstream_watchlist_gzip() const {
    return upstream_watchlist_gzip_.load(std::memory_order_relaxed);
  }

  // The self-check's view (proxy/sync/self_check.h): the digest of the store's (key,
  // resourceVersion) pairs and the RV the store is at, computed under the lock without copying
  // anything; nullopt before the cache has synced.
  struct Digest {
    uint64_t resource_version = 0;
    VersionDigest versions;
  };
  std::optional<Digest> VersionsDigest() const;
  // The (key, resourceVersion) pairs of the state at `rv` (the store rolled back over the event
  // window, as ListPage); FailedPrecondition when that state is not known any more.
  absl::StatusOr<std::vector<Listed>> VersionsAt(uint64_t rv) const;

  // --- History filled in from the upstream (cacher_history.cc) -------------------------------
  // A watch from `rv` older than the window, when the window begins at an upstream LIST (or
  // a fill) and nothing was evicted: the RV the window starts after, so that the upstream's
  // events (rv, that RV] would complete it. nullopt: the window reaches `rv`, or it cannot be
  // filled (not synced; events evicted).
  std::optional<uint64_t> HistoryNeeded(uint64_t rv) const;
  struct HistoryEvent {
    EventType type;
    ObjectPtr object;  // As for Apply.
  };
  // Inserts the upstream's events after `after_rv`, up to `through_rv` (the HistoryNeeded answer
  // the fill was made for), before the window as history: the store does not change (the LIST
  // it came from has them), no watcher is told, and watches from `after_rv` on can start. Each
  // event's previous state is the one before it in `events`; for an object's first one, its
  // state in `at_after` (every object at `after_rv`, a LIST at exactly that RV) when given, else
  // unknown (kAdded: absent), so that a watcher whose selectors read the object's content cannot
  // be replayed such a kModified (Watch answers 410 for it). Events outside
  // (after_rv, through_rv] are dropped; those the window has already are not repeated.
  // FailedPrecondition when the window changed meanwhile (a relist), ResourceExhausted when
  // they do not fit its bounds.
  absl::Status InsertHistory(uint64_t after_rv, uint64_t through_rv,
                             std::vector<HistoryEvent> events,
                             const std::vector<ObjectPtr>* at_after = nullptr);
  // The event window's bounds (fixed at construction).
  const EventRingLimits& window_limits() const { return limits_; }

  bool synced() const;
  // Without the lock: what the events queued so far reach.
  uint64_t resource_version() const;
  // The oldest RV a watch can resume from (older: 410).
  uint64_t window_start_rv() const;
  // Whether this cache proves that nothing a watch with `filter` would see happened after
  // `after_rv` up to `through_rv`: its window reaches back to `after_rv`, it has seen
  // `through_rv`, and none of its events between concerns an object the filter matches (now or
  // before). A resource's JSON and protobuf caches hold the same events, so one vouches for a
  // watch too old for the other's window (the protobuf cache starts later, and at a different
  // RV on each replica).
  bool NothingFor(const WatchFilter& filter, uint64_t after_rv, uint64_t through_rv) const;
  size_t object_count() const;
  size_t watcher_count() const;

  struct Stats {
    size_t objects = 0;
    size_t watchers = 0;
    size_t window_events = 0;
    size_t window_bytes = 0;
    size_t queued_bytes = 0;    // Across watchers, waiting to be written.
    uint64_t dispatched = 0;    // Events queued to watchers, counted per watcher.
    uint64_t watchers_cut = 0;  // Watchers closed for exceeding their byte budget.
    // Watchers closed, among those furthest behind, when the process-wide budget was spent.
    uint64_t watchers_cut_total_budget = 0;
    uint64_t resource_version = 0;
    bool synced = false;
    Clock::time_point last_update;  // Last upstream event, bookmark or list.
    uint64_t content_proofs = 0;    // ProveCurrent calls that advanced the cache.
    // Events that arrived older than the cache after a ProveCurrent advanced it (dropped).
    uint64_t events_after_proof = 0;
  };
  // A consistent snapshot of the counters (walks the watchers: for scrapes, not hot paths).
  Stats GetStats() const;

  // --- Warm restart (cache/snapshot.h) ------------------------------------------------------
  // What a snapshot keeps: the objects at `resource_version` and the event window after
  // `window_start_rv`, oldest first, sharing the cache's objects (copied pointers, no bytes).
  struct State {
    uint64_t resource_version = 0;
    uint64_t window_start_rv = 0;
    std::vector<ObjectPtr> objects;  // By key.
    std::vector<EventPtr> events;
    std::string bookmark_template;
  };
  // The state of a synced cache (nullopt before its first list). Holds the lock only to copy
  // pointers.
  std::optional<State> ExportState() const;
  // Installs a snapshot's state in a cache that has not synced yet, which then is synced and
  // serves at once; the events are kept as received now. FailedPrecondition when already
  // synced, InvalidArgument when the events do not follow the window start in RV order.
  absl::Status ImportState(State state);

  // --- Readers --------------------------------------------------------------------------------
  struct ListResult {
    uint64_t resource_version = 0;
    std::vector<ObjectPtr> items;  // Sorted by key, as the apiserver lists.
  };
  ListResult List(const WatchFilter& filter) const;
  // A page of a list, as the apiserver's cacher pages (cacher.go GetList, watch_cache.go
  // waitUntilFreshAndList): the state at `at_rv` (the current state when 0), keys from
  // `start_key` on, at most `limit` items matching `filter` (no limit when 0).
  struct PageRequest {
    uint64_t at_rv = 0;
    std::string start_key;  // A store key ("ns/name\0"), inclusive.
    int64_t limit = 0;
    // List the objects of the pods' spec.nodeName index (the current state only; no start
    // key): then `has_more` counts only that node's pods, as the apiserver's index lists.
    std::optional<std::string> node_name_index;
  };
  struct Page {
    uint64_t resource_version = 0;
    std::vector<ObjectPtr> items;
    // More candidates (matching or not) follow the last item: the apiserver then mints a
    // continue token from the last item's key.
    bool has_more = false;
    // Candidates from the start key on (matching or not), for remainingItemCount.
    int64_t candidates = 0;
  };
  // FailedPrecondition when the state at `at_rv` is not known: older than the event window (or
  // the last relist), or newer than the cache.
  absl::StatusOr<Page> ListPage(const WatchFilter& filter, const PageRequest& request) const;

  // The object with `key`, and the cache's RV.
  std::pair<ObjectPtr, uint64_t> Get(const std::string& key) const;

  enum class Start { kInitialState, kAfterVersion };
  struct WatchRequest {
    WatchFilter filter;
    Start start = Start::kInitialState;
    uint64_t resource_version = 0;  // For kAfterVersion.
    size_t max_queue_bytes = 16u << 20;
    std::function<void()> notify;
    QueueBudget* total_budget = nullptr;  // The process-wide one; null: none.
    // Instead of `notify`, when set: the watcher is notified through this sink as `sink_ref`.
    NotifySink* sink = nullptr;
    NotifySink::Ref sink_ref;
  };
  // Registers a watcher whose queue starts with the initial state (ADDED per matching object,
  // by key) or with the window's events after the RV, then continues with live events, with no
  // gap between the two. OutOfRange (410) when the window no longer reaches back to the RV.
  // From an RV newer than the cache, the watch starts with the first event after that RV.
  absl::StatusOr<std::shared_ptr<CacheWatcher>> Watch(WatchRequest request);
  void RemoveWatcher(CacheWatcher* watcher);
  // Closes every watcher (shutdown).
  void CloseAll();

  // A BOOKMARK frame at `rv`, built once per RV (and form) and shared; `partial_metadata`: its
  // object as PartialObjectMetadata, as the apiserver converts a bookmark too; `cbor`: a JSON
  // cache's bookmark in CBOR (application/cbor-seq).
  std::shared_ptr<const std::string> BookmarkFrame(uint64_t rv, bool initial_events_end = false,
                                                   bool partial_metadata = false,
                                                   bool cbor = false) const;
  // The same in the form a watcher with `filter` gets.
  std::shared_ptr<const std::string> BookmarkFrame(uint64_t rv, const WatchFilter& filter,
                                                   bool initial_events_end = false) const {
    return BookmarkFrame(rv, initial_events_end, filter.partial_metadata, filter.cbor);
  }

  // Calls `ready` (without the lock, on the thread that advances the RV, or at once) when the
  // cache's RV reaches `rv`.
  void WaitForVersion(uint64_t rv, std::function<void()> ready);

 private:
  // The watchers to notify once the lock is released. A sink's are told together (one call
  // per sink and event); the others are held here, since their session may drop its own
  // reference meanwhile (a raw pointer here was a use after free under a flood of watches
  // ending while events were dispatched).
  struct Notifications {
    std::vector<std::shared_ptr<CacheWatcher>> functions;
    std::vector<std::pair<NotifySink*, std::vector<NotifySink::Ref>>> sinks;
    void Add(CacheWatcher& watcher);
  };
  void DispatchLocked(const EventPtr& event, Notifications* notify)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `streamed`: `rv` came in order on an upstream stream (list, event, bookmark), which then
  // can carry nothing older; not so for ProveCurrent.
  void AdvanceLocked(uint64_t rv, std::vector<std::function<void()>>* ready, bool streamed = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddEventLocked(EventType type, ObjectPtr object, ObjectPtr prev, Notifications* notify)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string ProtoBookmarkFrame(uint64_t rv, bool initial_events_end, bool partial_metadata) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string JsonBookmarkObject(uint64_t rv, bool initial_events_end) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OutOfRange (410) when `events`, a watch's replay, hold filled-in history a watcher with
  // `filter` cannot be told exactly (InsertHistory).
  absl::Status ReplayableLocked(const WatchFilter& filter, uint64_t rv,
                                const std::vector<EventPtr>& events) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Notifies, then calls `ready`, without the lock.
  static void Finish(const Notifications& notify, std::vector<std::function<void()>>& ready);

  const ResourceType type_;
  const Encoding encoding_;
  const EventRingLimits limits_;
  const std::function<Clock::time_point()> now_;

  mutable absl::Mutex mu_;
  absl::btree_map<std::string, ObjectPtr> store_ ABSL_GUARDED_BY(mu_);
  // The keys of store_ by the type's node-name index field (pods: spec.nodeName), as the
  // apiserver's watch cache indexes pods: a kubelet's LIST of its own pods reads its node's
  // keys instead of scanning every pod under this lock (19,000 pods × 9,500 kubelets was a
  // minute of a starved two-core machine). Empty for other types.
  const std::string node_field_;
  absl::flat_hash_map<std::string, absl::btree_set<std::string>> by_node_ ABSL_GUARDED_BY(mu_);
  void IndexLocked(const ObjectPtr& before, const ObjectPtr& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReindexLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  EventRing ring_ ABSL_GUARDED_BY(mu_);
  WatcherIndex watchers_ ABSL_GUARDED_BY(mu_);
  uint64_t rv_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t streamed_rv_ ABSL_GUARDED_BY(mu_) = 0;  // AdvanceLocked's `streamed` RVs only.
  uint64_t content_proofs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t events_after_proof_ ABSL_GUARDED_BY(mu_) = 0;
  // rv_, for resource_version() without the lock (every watch delivery reads it). Stored after
  // the events up to it were queued (release), so a reader that then takes a watcher's queue
  // finds them there.
  std::atomic<uint64_t> rv_published_{0};
  std::atomic<UpstreamSharding> upstream_sharding_{UpstreamSharding::kUnknown};
  std::atomic<UpstreamCbor> upstream_cbor_{UpstreamCbor::kUnknown};
  std::atomic<UpstreamDrop> upstream_drop_{UpstreamDrop::kUnknown};
  std::atomic<UpstreamWatchListGzip> upstream_watchlist_gzip_{UpstreamWatchListGzip::kUnknown};
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  std::string bookmark_template_ ABSL_GUARDED_BY(mu_);
  // The last bookmark built, per form (the object's, PartialObjectMetadata, CBOR) and kind
  // (periodic, then initial-events-end): the watchers it goes to share its bytes.
  mutable std::array<std::shared_ptr<const std::string>, 6> last_bookmark_ ABSL_GUARDED_BY(mu_);
  mutable std::array<uint64_t, 6> last_bookmark_rv_ ABSL_GUARDED_BY(mu_){};
  std::multimap<uint64_t, std::function<void()>> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t dispatched_ ABSL_GUARDED_BY(mu_) = 0;
  CutCounts cuts_;  // Atomic: a watcher may be cut from another cache's dispatch.
  Clock::time_point last_update_ ABSL_GUARDED_BY(mu_);
};

// The encoding a read with `filter` is answered in: the cache's, or CBOR from a JSON cache.
inline Encoding WireEncoding(const Cacher& cacher, const WatchFilter& filter) {
  return filter.cbor ? Encoding::kCbor : cacher.encoding();
}

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_CACHER_H_
