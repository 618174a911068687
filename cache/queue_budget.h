// QueueBudget: the memory the queues of every cached watch of the process hold together
// (--watchers-max-total-queue-bytes), beside each watcher's own budget
// (--watcher-max-queue-bytes). Counted as memory holds it (CacheWatcher::Push): an event's
// object once while any queue holds its frame (10,000 watchers behind on the same 1 KiB object
// count 1 KiB), plus each queued frame's entries (CacheWatcher::EntryBytes: 32 bytes a piece and
// 8 for its hold, 104 a frame). A watcher's own budget counts its frames whole (what that
// client is behind by), as kube_fanout_watch_queue_bytes does.
//
// Delivery costs two atomic adds (the object's holds, TryAdd) and a session's take a subtract
// per frame and one Release; no lock. Past the limit, MakeRoom cuts the watchers with the most
// bytes queued (their own count: the furthest behind), largest first, as the per-watcher budget
// cuts one: their watches end and their clients resume from their last RV. Watchers register
// here when made and leave when destroyed (a lock, once per watch).
//
// Shared by every cache and thread; thread-safe.
#ifndef KUBE_FANOUT_CACHE_QUEUE_BUDGET_H_
#define KUBE_FANOUT_CACHE_QUEUE_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace kf {

class CacheWatcher;

class QueueBudget {
 public:
  // `limit`: bytes queued across all watchers; 0: unlimited (still counted).
  explicit QueueBudget(size_t limit) : limit_(limit) {}
  QueueBudget(const QueueBudget&) = delete;
  QueueBudget& operator=(const QueueBudget&) = delete;

  size_t limit() const { return limit_; }
  size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // Watchers cut to keep the total under the limit (CacheWatcher::CutForTotal counts them).
  uint64_t cuts() const { return cuts_.load(std::memory_order_relaxed); }
  void CountCut() { cuts_.fetch_add(1, std::memory_order_relaxed); }

  // Counts `bytes` in, unless that would pass the limit and `force` is false.
  bool TryAdd(size_t bytes, bool force);
  void Release(size_t bytes);

  // Cuts registered watchers holding more than `floor` bytes, most first, until `bytes` more
  // fit under the limit (or none above the floor is left). The caller passes what the watcher
  // asking for room would hold: only watchers further behind than it are cut for it, and if
  // that is not enough the caller cuts it (so a crowd of watchers one event behind each is not
  // cut for one another). Walks the watchers only when one may hold more than `floor` (so a
  // crowd costs no walk per delivery). Called without any watcher's lock held; notifies each
  // watcher cut. Returns how many were cut.
  size_t MakeRoom(size_t bytes, size_t floor);

  // A watcher's queue after a delivery: keeps an upper bound of the largest queue, so a
  // MakeRoom that could not find anyone further behind skips its walk.
  void NoteQueued(size_t bytes) {
    size_t seen = largest_.load(std::memory_order_relaxed);
    while (bytes > seen &&
           !largest_.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
  }
  // Walks over the watchers MakeRoom made (for tests).
  uint64_t walks() const { return walks_.load(std::memory_order_relaxed); }

  // CacheWatcher's constructor and destructor.
  void Register(CacheWatcher* watcher);
  void Unregister(CacheWatcher* watcher);

 private:
  const size_t limit_;
  std::atomic<size_t> queued_{0};
  std::atomic<uint64_t> cuts_{0};
  std::atomic<uint64_t> walks_{0};
  // At least the largest queue of any watcher (exact after a walk, raised by NoteQueued).
  std::atomic<size_t> largest_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<CacheWatcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_QUEUE_BUDGET_H_
