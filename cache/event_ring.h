// EventRing: the bounded window of recent events of one resource, oldest first, used to resume
// a watch from a resourceVersion. Bounded by bytes (the objects' sizes) and by count; an event
// is dropped by count only once it is older than the minimum history, so a burst does not
// shorten history below it unless the byte bound forces it.
// Not thread-safe: owned by a WatchCache, under its lock.
#ifndef KUBE_FANOUT_CACHE_EVENT_RING_H_
#define KUBE_FANOUT_CACHE_EVENT_RING_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/watch_event.h"

namespace kf {

struct EventRingLimits {
  size_t max_bytes = 256u << 20;
  size_t max_events = 100000;
  std::chrono::seconds min_history{75};
};

class EventRing {
 public:
  explicit EventRing(EventRingLimits limits) : limits_(limits) {}

  // Appends an event (RVs strictly increasing) and evicts what the limits require.
  void Push(EventPtr event, std::chrono::steady_clock::time_point now);

  // Drops everything (after a relist); `since_rv` is the RV the window now starts after.
  void Reset(uint64_t since_rv);

  // Puts `events` (RVs strictly increasing, in (after_rv, start_rv()]) before the window, which
  // then starts after `after_rv`: history the window did not have (its start was a LIST), filled
  // in from the upstream. FailedPrecondition when events were evicted (the window no longer
  // begins at its start) or `after_rv` is not before it; InvalidArgument for events out of
  // order or outside the range; ResourceExhausted when they would not fit the byte or count
  // bound (nothing is inserted then).
  absl::Status InsertHistory(uint64_t after_rv, std::vector<EventPtr> events);

  // Events with RV > rv, oldest first. OutOfRange when events after `rv` were already evicted,
  // with the apiserver's message: "too old resource version: <rv> (<oldest-1>)".
  absl::StatusOr<std::vector<EventPtr>> Since(uint64_t rv) const;

  // True when nothing was evicted since the window started (Reset or construction): the window
  // then covers every change after its start RV.
  bool complete() const { return !evicted_; }
  uint64_t start_rv() const { return start_rv_; }
  // The RV the inserted history reaches (InsertHistory: the window's start before it); 0 when
  // none was inserted since the last Reset.
  uint64_t history_through_rv() const { return history_through_rv_; }
  // The oldest RV a watch may start after (Since succeeds from it on).
  uint64_t oldest_resumable_rv() const {
    return evicted_ && !events_.empty() ? events_.front()->resource_version() - 1 : start_rv_;
  }
  size_t size() const { return events_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  EventRingLimits limits_;
  std::deque<EventPtr> events_;
  size_t bytes_ = 0;
  uint64_t start_rv_ = 0;  // RV the window starts after.
  bool evicted_ = false;
  uint64_t history_through_rv_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_EVENT_RING_H_
