#include "cache/cache_watcher.h"

namespace kf {

bool WatchFilter::Matches(const CachedObject& object) const {
  if (!namespace_.empty() && object.namespace_() != namespace_) return false;
  if (name && object.name() != *name) return false;
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

CacheWatcher::~CacheWatcher() {
  if (budget_ == nullptr) return;
  budget_->Unregister(this);
  absl::MutexLock lock(&mu_);
  budget_->Release(queued_bytes_);
}

void CacheWatcher::Release(Batch* batch) {
  batch->pieces.clear();
  if (batch->pieces.capacity() > kKeptPieces) std::vector<Piece>().swap(batch->pieces);
}

void CacheWatcher::Take(Batch* into) {
  Release(into);  // Outside the lock.
  absl::MutexLock lock(&mu_);
  if (budget_ != nullptr) budget_->Release(queued_bytes_);
  into->pieces.swap(queue_);
  into->bytes = queued_bytes_;
  into->last_rv = last_rv_;
  into->closed = closed_;
  into->close_cause = close_cause_;
  queued_bytes_ = 0;
  last_rv_ = 0;
  pending_notify_ = false;
}

void CacheWatcher::CutLocked(std::atomic<uint64_t> CutCounts::*reason) {
  // The client resumes from the last RV it received and is served from the window.
  if (budget_ != nullptr) budget_->Release(queued_bytes_);
  queue_.clear();
  queued_bytes_ = 0;
  closed_ = true;
  close_cause_ = CloseCause::kTooSlow;
  if (cuts_ != nullptr) (cuts_->*reason).fetch_add(1, std::memory_order_relaxed);
  // A cut is always told: its session is likely stuck writing to the client (a notification
  // is pending since), and the wake-up is what aborts that write.
  pending_notify_ = true;
}

CacheWatcher::Pushed CacheWatcher::Push(std::span<Piece> pieces, size_t bytes, uint64_t rv) {
  absl::MutexLock lock(&mu_);
  if (closed_) return Pushed::kQuiet;
  if (queued_bytes_ + bytes > max_queue_bytes_) {
    CutLocked(&CutCounts::queue_bytes);
    return Pushed::kNotify;
  }
  // A watcher with nothing queued has kept up: its event always goes (it holds a reference to a
  // frame others share, not a backlog). Without that, one event to every watcher of a large
  // fleet could cut healthy watchers.
  if (budget_ != nullptr && bytes > 0 && !budget_->TryAdd(bytes, queued_bytes_ == 0)) {
    return Pushed::kNoRoom;
  }
  for (Piece& p : pieces) queue_.push_back(std::move(p));
  queued_bytes_ += bytes;
  last_rv_ = rv;
  if (budget_ != nullptr && bytes > 0) budget_->NoteQueued(queued_bytes_);
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
  close_cause_ = CloseCause::kEnded;
  const bool notify = !pending_notify_;
  pending_notify_ = true;
  return notify;
}

bool CacheWatcher::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

size_t CacheWatcher::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

}  // namespace kf
