// Wakeups: the per-thread half of fan-out dispatch. The cache's dispatcher runs on the cache
// thread and must tell each watcher's thread that the watcher has events; posting one task per
// watcher would cost a queue operation (and often a thread wake-up) per watcher per event.
// Instead each worker thread has one Wakeups: the dispatcher appends the watchers to wake, and
// the first append since the thread last drained posts a single task that wakes them all. An
// event for 5,000 watchers on two threads costs two posts, not 5,000.
#ifndef KUBE_FANOUT_SERVE_WAKEUPS_H_
#define KUBE_FANOUT_SERVE_WAKEUPS_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kf {

namespace asio = boost::asio;

// What Wakeups wakes (a waiting watch). Woken on the Wakeups' thread.
class Wakeable {
 public:
  virtual ~Wakeable() = default;
  virtual void Wake() = 0;
};

class Wakeups {
 public:
  explicit Wakeups(asio::any_io_executor exec) : exec_(std::move(exec)) {}

  // From any thread: wakes `w` on this thread soon (with the others queued meanwhile), unless it
  // is gone by then. No allocation once the queues have grown to the usual burst.
  void Add(std::weak_ptr<Wakeable> w) {
    bool post = false;
    {
      absl::MutexLock lock(&mu_);
      pending_.push_back(std::move(w));
      post = !posted_;
      posted_ = true;
    }
    if (post) asio::post(exec_, [this] { Drain(); });
  }

 private:
  void Drain() {
    {
      absl::MutexLock lock(&mu_);
      running_.swap(pending_);
      posted_ = false;
    }
    for (const auto& weak : running_) {
      if (auto w = weak.lock()) w->Wake();
    }
    running_.clear();
  }

  asio::any_io_executor exec_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Wakeable>> pending_;
  bool posted_ = false;
  std::vector<std::weak_ptr<Wakeable>> running_;  // Drain's, on this thread only.
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WAKEUPS_H_
