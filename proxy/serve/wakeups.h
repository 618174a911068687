// Wakeups: the per-thread half of fan-out dispatch. The cache's dispatcher runs on the cache
// thread and must tell each watcher's thread that the watcher has events; posting one task per
// watcher would cost a queue operation (and often a thread wake-up) per watcher per event.
// Instead each worker thread has one Wakeups, the NotifySink of the watchers on that thread: the
// dispatcher hands it all of an event's watchers on this thread at once (one lock), and the
// first hand-over since the thread last drained posts a single task that wakes them all. An
// event for 5,000 watchers on two threads costs two locks and two posts, not 5,000.
//
// The watches are named by slots of a table that only this thread touches (Register and
// Unregister are called on it, Drain runs on it), each slot with a generation: a wake-up for a
// watch that ended meanwhile finds another generation (or none) and is dropped. So the
// dispatcher holds no reference on a watch, and a wake-up costs no atomic operation on it.
#ifndef KUBE_FANOUT_SERVE_WAKEUPS_H_
#define KUBE_FANOUT_SERVE_WAKEUPS_H_

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache_watcher.h"
#include "proxy/serve/gzip_members.h"

namespace kf {

namespace asio = boost::asio;

// What Wakeups wakes (a waiting watch). Woken on the Wakeups' thread.
class Wakeable {
 public:
  virtual ~Wakeable() = default;
  virtual void Wake() = 0;
  // Asks the CPU for what Wake will read first (a hint, called a few slots ahead): a wake-up
  // is mostly cache misses on a different watch each time.
  virtual void Prefetch() const {}
  // The same for what those lines point to, called nearer (once Prefetch's lines are in).
  virtual void PrefetchDeep() const {}
};

class Wakeups final : public NotifySink {
 public:
  explicit Wakeups(asio::any_io_executor exec) : exec_(std::move(exec)) {}
  Wakeups(const Wakeups&) = delete;
  Wakeups& operator=(const Wakeups&) = delete;

  // On this thread: a slot for `w` until Unregister, which must come before `w` is destroyed.
  Ref Register(Wakeable* w);
  void Unregister(Ref ref);

  // From any thread: wakes the watches `refs` name on this thread soon (with the others handed
  // over meanwhile), those still registered by then. No allocation once the queues have grown to
  // the usual burst.
  void Notify(std::span<const Ref> refs) override;

  // Called at the end of every drain, on this thread (e.g. to add up what the wake-ups counted).
  void set_after_drain(void (*f)()) { after_drain_ = f; }

  size_t registered() const { return slots_.size() - free_.size(); }

  // This thread's compressed frames, shared by its gzip watches (watch_gzip.h); this thread's.
  GzipMembers& gzip_members() { return gzip_members_; }

 private:
  void Drain();

  struct Slot {
    Wakeable* wakeable = nullptr;
    uint32_t generation = 0;
  };

  asio::any_io_executor exec_;
  absl::Mutex mu_;
  std::vector<Ref> pending_ ABSL_GUARDED_BY(mu_);
  bool posted_ ABSL_GUARDED_BY(mu_) = false;
  // This thread's only.
  std::vector<Ref> running_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  void (*after_drain_)() = nullptr;
  GzipMembers gzip_members_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WAKEUPS_H_
