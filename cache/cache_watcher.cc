#include "cache/cache_watcher.h"

namespace kf {

bool WatchFilter::Matches(const CachedObject& object) const {
  if (!namespace_.empty() && object.namespace_() != namespace_) return false;
  if (name && object.name() != *name) return false;
  return labels.Matches(object.labels()) && fields.Matches(object.fields());
}

CacheWatcher::CacheWatcher(WatchFilter filter, size_t max_queue_bytes, std::function<void()> notify)
    : filter_(std::move(filter)), max_queue_bytes_(max_queue_bytes), notify_(std::move(notify)) {}

CacheWatcher::Batch CacheWatcher::Take() {
  absl::MutexLock lock(&mu_);
  Batch b;
  b.pieces.swap(queue_);
  b.bytes = queued_bytes_;
  b.last_rv = last_rv_;
  b.closed = closed_;
  b.close_cause = close_cause_;
  queued_bytes_ = 0;
  last_rv_ = 0;
  pending_notify_ = false;
  return b;
}

bool CacheWatcher::Push(std::span<Piece> pieces, size_t bytes, uint64_t rv) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  bool cut = false;
  if (queued_bytes_ + bytes > max_queue_bytes_) {
    // Cut: the client resumes from the last RV it received and is served from the window.
    queue_.clear();
    queued_bytes_ = 0;
    closed_ = true;
    close_cause_ = CloseCause::kTooSlow;
    cut = true;
  } else {
    for (Piece& p : pieces) queue_.push_back(std::move(p));
    queued_bytes_ += bytes;
    last_rv_ = rv;
  }
  // A cut is always told: its session is likely stuck writing to the client (a notification
  // is pending since), and the wake-up is what aborts that write.
  const bool notify = !pending_notify_ || cut;
  pending_notify_ = true;
  return notify;
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
