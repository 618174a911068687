// CacheWatcher: one downstream watch as the cache sees it: what it selects (WatchFilter), and a
// bounded queue of frame pieces that reference shared event bytes. The cache pushes under its
// own lock from the reflector's thread; the watch's session takes batches from its own thread.
// A watcher whose queue exceeds its byte budget is closed (the client resumes from its last RV)
// and never slows the producer or anyone else. What the queue holds also counts in the
// process-wide QueueBudget, when there is one, as memory holds it (an event's object once for
// all the queues holding it, and each queue's entries), which may cut the watchers furthest
// behind.
//
// Shared (shared_ptr) by the Cacher and the session; the queue is guarded by its own mutex.
#ifndef KUBE_FANOUT_CACHE_CACHE_WATCHER_H_
#define KUBE_FANOUT_CACHE_CACHE_WATCHER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cache/cached_object.h"
#include "cache/field_selector.h"
#include "cache/label_selector.h"
#include "cache/queue_budget.h"
#include "cache/shard_selector.h"
#include "cache/watch_event.h"

namespace kf {

// What a list or watch selects: namespace, exact name, label, field and shard selectors; and
// the form it gets the selected objects in.
struct WatchFilter {
  std::string namespace_;           // "" → every namespace.
  std::optional<std::string> name;  // metadata.name required by the field selector.
  LabelSelector labels;
  FieldSelector fields;
  ShardSelector shard;  // Matched on the object's hashes, computed once per object version.
  // Objects as PartialObjectMetadata (CachedObject::PartialMetadata), selected by the object.
  bool partial_metadata = false;
  // Objects in CBOR (CachedObject::Cbor) from a JSON cache; the kind's []byte member.
  bool cbor = false;
  // Objects without metadata.managedFields (CachedObject::WithoutManagedFields), then in the
  // form above: the reader's flow schema says dropManagedFields.
  bool drop_managed_fields = false;
  std::string_view cbor_bytes_map;

  bool Matches(const CachedObject& object) const;
  // Whether matching reads what an update can change (labels, fields): otherwise an object
  // matches for good or never (namespace, name and uid do not change).
  bool ReadsContent() const { return !labels.Empty() || !fields.Empty(); }
};

// Where a watcher's notifications go, when not a function of its own: one sink per worker thread
// takes the notifications of one event for all of its watchers at once (one lock, one post),
// each naming its watcher by a slot and generation the sink handed out. The dispatcher keeps
// no reference on the watchers it notifies, and calls nothing per watcher.
class NotifySink {
 public:
  struct Ref {
    uint32_t slot = 0;
    uint32_t generation = 0;
  };
  // From any thread, without any watcher's or cache's lock held.
  virtual void Notify(std::span<const Ref> refs) = 0;

 protected:
  ~NotifySink() = default;
};

// Watchers cut, by reason (kept by the cache of their resource, counted by the watcher).
struct CutCounts {
  std::atomic<uint64_t> queue_bytes{0};        // Past its own budget.
  std::atomic<uint64_t> total_queue_bytes{0};  // Among the furthest behind past the QueueBudget.
};

class CacheWatcher : public std::enable_shared_from_this<CacheWatcher> {
 public:
  // `notify` is called without the cache's lock when the queue becomes non-empty or the watcher
  // is closed; it must only schedule work (e.g. post to the session's thread). `budget` (may be
  // null) is the process-wide one; `cuts` (may be null) counts this watcher's cut.
  CacheWatcher(WatchFilter filter, size_t max_queue_bytes, std::function<void()> notify,
               QueueBudget* budget = nullptr, CutCounts* cuts = nullptr);
  // The same, notified through `sink` (not null) as `ref`.
  CacheWatcher(WatchFilter filter, size_t max_queue_bytes, NotifySink* sink, NotifySink::Ref ref,
               QueueBudget* budget = nullptr, CutCounts* cuts = nullptr);
  ~CacheWatcher();
  CacheWatcher(const CacheWatcher&) = delete;
  CacheWatcher& operator=(const CacheWatcher&) = delete;

  const WatchFilter& filter() const { return filter_; }
  QueueBudget* budget() const { return budget_; }

  // Why a watcher closed: cut for not reading (its queue passed the budget, or it was among the
  // furthest behind when the process-wide budget was spent), or ended by the cache (shutdown).
  enum class CloseCause { kOpen, kTooSlow, kEnded };

  struct Batch {
    std::vector<Piece> pieces;
    size_t bytes = 0;
    uint64_t last_rv = 0;  // RV of the newest event taken (0: none).
    // When the oldest event taken arrived from the upstream (none: no event, or only a watch's
    // initial state).
    std::chrono::steady_clock::time_point oldest_received{};
    bool closed = false;  // No more events will come.
    CloseCause close_cause = CloseCause::kOpen;
  };
  // Takes everything queued (consumer side) into `into`, whose vector (emptied first) becomes
  // the queue's: a watch that reuses its Batch allocates nothing per delivery.
  void Take(Batch* into);
  // Lets a taken batch's frames go, and its vector's room too past a few pieces (a burst's, or
  // a watch's initial state): an idle watch keeps no more than kKeptPieces of room.
  static void Release(Batch* batch);
  static constexpr size_t kKeptPieces = 4;
  Batch Take() {
    Batch b;
    Take(&b);
    return b;
  }

  // Producer side: appends one event's frame of `bytes` (0: not held against either budget, as a
  // watch's initial state). Past the byte budget the queue is dropped and the watcher closed
  // (kTooSlow, notify due). When the process-wide budget has no room for it (and the queue is
  // not empty: a watcher that has caught up always gets the event), nothing is queued and
  // kNoRoom says so: the cache makes room (QueueBudget::MakeRoom) and pushes again, or cuts
  // this watcher (CutForTotal). kQuiet: queued with a notification already pending, or the
  // watcher is closed.
  //
  // `shared`: the object whose bytes the frame carries (kept alive by the pieces), counted in
  // the process-wide budget once while any queue holds it; called under its cache's lock.
  // Besides, the budget counts EntryBytes(pieces) for this queue.
  enum class Pushed { kQuiet, kNotify, kNoRoom };
  // `received`: when the event arrived from the upstream (none for the initial state).
  Pushed Push(std::span<Piece> pieces, size_t bytes, uint64_t rv,
              const CachedObject* shared = nullptr,
              std::chrono::steady_clock::time_point received = {});
  // What a queued frame of `pieces` pieces costs the process-wide budget besides its shared
  // bytes: its pieces and its hold on the object.
  static constexpr size_t EntryBytes(size_t pieces) {
    return pieces * sizeof(Piece) + sizeof(void*);  // The hold: one pointer in holds_.
  }
  // Cuts the watcher for the process-wide budget (kTooSlow), if open with bytes queued. True:
  // it was cut (a notify is due).
  bool CutForTotal();
  // Closes the watcher (cache gone, relist, shutdown). Returns true when a notify is due.
  bool Close();
  // Without the lock: once true, it stays true.
  bool closed() const { return closed_flag_.load(std::memory_order_acquire); }

  // The frames' bytes queued, as this watcher's own budget counts them (each frame whole).
  // Without the lock (a metrics scrape sums it over every watcher): the value as last set.
  size_t queued_bytes() const;
  // What this queue's entries count in the process-wide budget (EntryBytes of each frame),
  // besides the shared bytes of the objects it holds.
  size_t entry_bytes() const;

  // The cache's RV when the watcher was registered (set by the Cacher).
  uint64_t start_rv = 0;
  // Events at or below this RV are not for this watcher: it asked to start after an RV the
  // cache had not reached yet (set by the Cacher).
  uint64_t skip_through = 0;
  // Set by the Cacher when registered; used to unregister.
  int index_bucket = -1;
  std::string index_key;

 private:
  void CutLocked(std::atomic<uint64_t> CutCounts::*reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the queue's share of the process-wide budget back (before its pieces go).
  void GiveBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WatchFilter filter_;
  const size_t max_queue_bytes_;
  const std::function<void()> notify_;
  NotifySink* const sink_ = nullptr;
  const NotifySink::Ref ref_;
  QueueBudget* const budget_;
  CutCounts* const cuts_;

  mutable absl::Mutex mu_;
  std::vector<Piece> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<size_t> queued_bytes_seen_{0};  // queued_bytes_, stored with it: queued_bytes().
  // For the process-wide budget: the objects whose frames are queued (one hold each), and what
  // the entries count (EntryBytes).
  std::vector<const CachedObject*> holds_ ABSL_GUARDED_BY(mu_);
  size_t entry_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_rv_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point oldest_received_ ABSL_GUARDED_BY(mu_){};
  bool pending_notify_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> closed_flag_{false};  // closed_, for readers without the lock.
  CloseCause close_cause_ ABSL_GUARDED_BY(mu_) = CloseCause::kOpen;

 public:
  void Notify() const {
    if (sink_ != nullptr) {
      sink_->Notify(std::span<const NotifySink::Ref>(&ref_, 1));
    } else {
      notify_();
    }
  }
  // Asks the CPU for the whole watcher (a hint, for a dispatch about to match and push to it).
  void PrefetchForPush() const {
    const char* p = reinterpret_cast<const char*>(this);
    for (size_t at = 0; at < sizeof(CacheWatcher); at += 64) __builtin_prefetch(p + at);
  }
  // Asks the CPU for the lines a Take reads (a hint, for a fan-out about to take from it).
  void Prefetch() const {
    __builtin_prefetch(&mu_);
    __builtin_prefetch(&queue_);
    __builtin_prefetch(&closed_flag_);
  }
  // Its sink (null: notified by its function) and its name there.
  NotifySink* sink() const { return sink_; }
  NotifySink::Ref sink_ref() const { return ref_; }
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_CACHE_WATCHER_H_
