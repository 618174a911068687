#include "cache/cache_watcher.h"

#include "common/kept_room.h"

namespace kf {

bool WatchFilter::Matches(const CachedObject& object) const {
  if (!namespace_.empty() && object.namespace_() != namespace_) return false;
  if (name && object.name() != *name) return false;
  if (!shard.Matches(object.shard_hashes())) return false;
  return labels.Matches(object.labels()) && fields.Matches(object.fields());
}

CacheWatcher::CacheWatcher(WatchFilter filter, size_t max_queue_bytes, std::function<void()> notify,
                           QueueBudget* budget, CutCounts* cuts)
    : filter_(std::move(filter)),
      max_queue_bytes_(max_queue_bytes),
      notify_(std::move(notify)),
      budget_(budget),
      cuts_(cuts) {
  if (budget_ != nullptr) budget_->Register(this);
}

CacheWatcher::CacheWatcher(WatchFilter filter, size_t max_queue_bytes, NotifySink* sink,
                           NotifySink::Ref ref, QueueBudget* budget, CutCounts* cuts)
    : filter_(std::move(filter)),
      max_queue_bytes_(max_queue_bytes),
      sink_(sink),
      ref_(ref),
      budget_(budget),
      cuts_(cuts) {
  if (budget_ != nullptr) budget_->Register(this);
}

CacheWatcher::~CacheWatcher() {
  if (budget_ == nullptr) return;
  budget_->Unregister(this);
  absl::MutexLock lock(&mu_);
  GiveBackLocked();
}

void CacheWatcher::GiveBackLocked() {
  if (budget_ == nullptr) return;
  // The objects are alive: the queue's pieces still hold them.
  size_t freed = entry_bytes_;
  for (const CachedObject* object : holds_) {
    if (object->queue_holds().Drop()) freed += object->bytes().size();
  }
  budget_->Release(freed);
  entry_bytes_ = 0;
  ClearKeepingRoom(holds_, kKeptPieces);
}

void CacheWatcher::Release(Batch* batch) { ClearKeepingRoom(batch->pieces, kKeptPieces); }

void CacheWatcher::Take(Batch* into) {
  Release(into);  // Outside the lock.
  absl::MutexLock lock(&mu_);
  GiveBackLocked();
  into->pieces.swap(queue_);
  into->bytes = queued_bytes_;
  into->last_rv = last_rv_;
  into->oldest_received = oldest_received_;
  into->closed = closed_;
  into->close_cause = close_cause_;
  queued_bytes_ = 0;
  queued_bytes_seen_.store(0, std::memory_order_relaxed);
  last_rv_ = 0;
  oldest_received_ = {};
  pending_notify_ = false;
}

void CacheWatcher::CutLocked(std::atomic<uint64_t> CutCounts::*reason) {
  // The client resumes from the last RV it received and is served from the window.
  GiveBackLocked();
  queue_.clear();
  queued_bytes_ = 0;
  queued_bytes_seen_.store(0, std::memory_order_relaxed);
  oldest_received_ = {};
  closed_ = true;
  closed_flag_.store(true, std::memory_order_release);
  close_cause_ = CloseCause::kTooSlow;
  if (cuts_ != nullptr) (cuts_->*reason).fetch_add(1, std::memory_order_relaxed);
  // A cut is always told: its session is likely stuck writing to the client (a notification
  // is pending since), and the wake-up is what aborts that write.
  pending_notify_ = true;
}

CacheWatcher::Pushed CacheWatcher::Push(std::span<Piece> pieces, size_t bytes, uint64_t rv,
                                        const CachedObject* shared,
                                        std::chrono::steady_clock::time_point received) {
  absl::MutexLock lock(&mu_);
  if (closed_) return Pushed::kQuiet;
  if (queued_bytes_ + bytes > max_queue_bytes_) {
    CutLocked(&CutCounts::queue_bytes);
    return Pushed::kNotify;
  }
  const bool counted = budget_ != nullptr && bytes > 0;
  if (counted) {
    // What memory holds for it: the object's bytes once for every queue holding its frame (the
    // first hold brings them in), and this queue's entries. A watcher with nothing queued has
    // kept up: its event always goes (it holds a reference to a frame others share, not a
    // backlog). Without that, one event to every watcher of a large fleet could cut healthy
    // watchers.
    const size_t entry = EntryBytes(pieces.size());
    const bool first = shared != nullptr && shared->queue_holds().Hold();
    const size_t cost = entry + (first ? shared->bytes().size() : 0);
    if (!budget_->TryAdd(cost, queued_bytes_ == 0)) {
      // Not queued. The first hold's bytes were not added; a later one's may now be the last
      // (the others drained meanwhile), and then takes them out.
      if (shared != nullptr && shared->queue_holds().Drop() && !first) {
        budget_->Release(shared->bytes().size());
      }
      return Pushed::kNoRoom;
    }
    entry_bytes_ += entry;
    if (shared != nullptr) holds_.push_back(shared);
  }
  for (Piece& p : pieces) queue_.push_back(std::move(p));
  queued_bytes_ += bytes;
  queued_bytes_seen_.store(queued_bytes_, std::memory_order_relaxed);
  last_rv_ = rv;
  if (oldest_received_ == std::chrono::steady_clock::time_point{}) oldest_received_ = received;
  if (counted) budget_->NoteQueued(queued_bytes_);
  const bool notify = !pending_notify_;
  pending_notify_ = true;
  return notify ? Pushed::kNotify : Pushed::kQuiet;
}

bool CacheWatcher::CutForTotal() {
  absl::MutexLock lock(&mu_);
  if (closed_ || queued_bytes_ == 0) return false;
  CutLocked(&CutCounts::total_queue_bytes);
  budget_->CountCut();
  return true;
}

bool CacheWatcher::Close() {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  closed_ = true;
  closed_flag_.store(true, std::memory_order_release);
  close_cause_ = CloseCause::kEnded;
  const bool notify = !pending_notify_;
  pending_notify_ = true;
  return notify;
}

size_t CacheWatcher::queued_bytes() const {
  return queued_bytes_seen_.load(std::memory_order_relaxed);
}

size_t CacheWatcher::entry_bytes() const {
  absl::MutexLock lock(&mu_);
  return entry_bytes_;
}

}  // namespace kf
