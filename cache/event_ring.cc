#include "cache/event_ring.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kf {

void EventRing::Push(EventPtr event, std::chrono::steady_clock::time_point now) {
  bytes_ += event->size_bytes();
  events_.push_back(std::move(event));
  while (!events_.empty()) {
    const EventPtr& front = events_.front();
    const bool over_bytes = bytes_ > limits_.max_bytes;
    const bool over_count =
        events_.size() > limits_.max_events && now - front->received() >= limits_.min_history;
    if (!over_bytes && !over_count) break;
    bytes_ -= front->size_bytes();
    start_rv_ = front->resource_version();
    evicted_ = true;
    events_.pop_front();
  }
}

void EventRing::Reset(uint64_t since_rv) {
  events_.clear();
  bytes_ = 0;
  start_rv_ = since_rv;
  evicted_ = false;
  history_through_rv_ = 0;
}

absl::Status EventRing::InsertHistory(uint64_t after_rv, std::vector<EventPtr> events) {
  if (evicted_) return absl::FailedPreconditionError("events were evicted from the window");
  if (after_rv >= start_rv_) return absl::FailedPreconditionError("the window reaches that RV");
  size_t bytes = 0;
  uint64_t last = after_rv;
  for (const EventPtr& e : events) {
    if (e->resource_version() <= last || e->resource_version() > start_rv_) {
      return absl::InvalidArgumentError("history events out of order or range");
    }
    last = e->resource_version();
    bytes += e->size_bytes();
  }
  if (bytes_ + bytes > limits_.max_bytes || events_.size() + events.size() > limits_.max_events) {
    return absl::ResourceExhaustedError("history does not fit the event window's bounds");
  }
  events_.insert(events_.begin(), std::make_move_iterator(events.begin()),
                 std::make_move_iterator(events.end()));
  bytes_ += bytes;
  history_through_rv_ = std::max(history_through_rv_, start_rv_);
  start_rv_ = after_rv;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EventPtr>> EventRing::Since(uint64_t rv) const {
  // Mirrors the apiserver's watch cache (watch_cache.go, getAllEventsSinceLocked): once events
  // were evicted, the oldest resumable RV is the oldest kept event's RV minus one.
  const uint64_t oldest_minus_one = oldest_resumable_rv();
  if (rv < oldest_minus_one) {
    return absl::OutOfRangeError(
        absl::StrCat("too old resource version: ", rv, " (", oldest_minus_one, ")"));
  }
  auto first =
      std::upper_bound(events_.begin(), events_.end(), rv,
                       [](uint64_t v, const EventPtr& e) { return v < e->resource_version(); });
  return std::vector<EventPtr>(first, events_.end());
}

}  // namespace kf
