// SessionSet: the open client sessions of one worker thread, so a graceful stop can reach
// them, and how many connections are assigned to it (the acceptor counts one in before the
// session exists; the session's end counts it out).
//
// Register, Unregister and StopAll on the owning thread; the connection count from any thread.
#ifndef KUBE_FANOUT_EDGE_SESSION_SET_H_
#define KUBE_FANOUT_EDGE_SESSION_SET_H_

#include <atomic>
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

 private:
  std::unordered_set<Stoppable*> sessions_;
  std::atomic<int64_t> connections_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_SESSION_SET_H_
