// SessionSet: the open client sessions of one worker thread, so a graceful stop can reach
// them, and how many connections are assigned to it (the acceptor counts one in before the
// session exists; the session's end counts it out).
//
// Register, Unregister, StopAll and the spread on the owning thread; the connection count from
// any thread.
#ifndef KUBE_FANOUT_EDGE_SESSION_SET_H_
#define KUBE_FANOUT_EDGE_SESSION_SET_H_

#include <atomic>
#include <cmath>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace kf {

class Stoppable {
 public:
  virtual ~Stoppable() = default;
  virtual void Stop() = 0;
};

class SessionSet {
 public:
  void Register(Stoppable* s) { sessions_.insert(s); }
  void Unregister(Stoppable* s) {
    sessions_.erase(s);
    RemoveConnection();
  }
  void AddConnection() { connections_.fetch_add(1, std::memory_order_relaxed); }
  void RemoveConnection() { connections_.fetch_sub(1, std::memory_order_relaxed); }
  int64_t connections() const { return connections_.load(std::memory_order_relaxed); }

  void StopAll() {
    // Copy first: a session may unregister itself while being stopped.
    const std::vector<Stoppable*> sessions(sessions_.begin(), sessions_.end());
    for (Stoppable* s : sessions) {
      if (sessions_.contains(s)) s->Stop();
    }
  }

  // A graceful stop spread over time (--shutdown-watch-termination-grace-period): the sessions
  // open now are stopped a share at a time (StopShare) instead of all at once.
  void BeginSpread() {
    spread_.assign(sessions_.begin(), sessions_.end());
    spread_total_ = spread_.size();
  }
  // Stops sessions of the spread until `share` (0..1) of them, rounded up, are stopped or gone.
  void StopShare(double share) {
    const auto target = static_cast<size_t>(std::ceil(share * static_cast<double>(spread_total_)));
    // Those that ended meanwhile (their clients left) count as stopped.
    std::erase_if(spread_, [this](Stoppable* s) { return !sessions_.contains(s); });
    while (!spread_.empty() && spread_total_ - spread_.size() < target) {
      Stoppable* s = spread_.back();
      spread_.pop_back();
      s->Stop();
    }
  }

 private:
  std::unordered_set<Stoppable*> sessions_;
  std::vector<Stoppable*> spread_;  // Still to stop, of the spread's sessions.
  size_t spread_total_ = 0;
  std::atomic<int64_t> connections_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_SESSION_SET_H_
