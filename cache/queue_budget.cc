#include "cache/queue_budget.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "cache/cache_watcher.h"

namespace kf {

bool QueueBudget::TryAdd(size_t bytes, bool force) {
  const size_t before = queued_.fetch_add(bytes, std::memory_order_relaxed);
  if (force || limit_ == 0 || before + bytes <= limit_) return true;
  queued_.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}

void QueueBudget::Release(size_t bytes) { queued_.fetch_sub(bytes, std::memory_order_relaxed); }

size_t QueueBudget::MakeRoom(size_t bytes, size_t floor) {
  if (limit_ == 0 || largest_.load(std::memory_order_relaxed) <= floor) return 0;
  absl::MutexLock lock(&mu_);
  walks_.fetch_add(1, std::memory_order_relaxed);
  // Recomputed by this walk; deliveries meanwhile raise it themselves.
  largest_.store(0, std::memory_order_relaxed);
  // Registered watchers are alive while the lock is held (their destructor unregisters).
  std::vector<std::pair<size_t, CacheWatcher*>> held;
  for (CacheWatcher* w : watchers_) {
    if (const size_t n = w->queued_bytes(); n > 0) held.emplace_back(n, w);
  }
  std::sort(held.begin(), held.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  size_t cut = 0;
  for (const auto& [n, w] : held) {
    if (n <= floor || queued() + bytes <= limit_) {
      NoteQueued(n);  // The largest left.
      break;
    }
    if (w->CutForTotal()) {
      w->Notify();  // A cut is always told: it aborts a write stuck on the client.
      ++cut;
    }
  }
  return cut;
}

void QueueBudget::Register(CacheWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.insert(watcher);
}

void QueueBudget::Unregister(CacheWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

}  // namespace kf
