// Cacher: history filled in from the upstream before a window that begins at a LIST, so that a
// watch resumed from an RV the upstream still serves gets its events instead of a 410 the
// apiserver would not send (the upstream watch is the reflector's: proxy/sync/backfill.cc).
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/cacher.h"

namespace kf {

std::optional<uint64_t> Cacher::HistoryNeeded(uint64_t rv) const {
  absl::MutexLock lock(&mu_);
  if (!synced_ || !ring_.complete() || rv >= ring_.start_rv()) return std::nullopt;
  return ring_.start_rv();
}

absl::Status Cacher::InsertHistory(uint64_t after_rv, uint64_t through_rv,
                                   std::vector<HistoryEvent> events,
                                   const std::vector<ObjectPtr>* at_after) {
  absl::MutexLock lock(&mu_);
  if (!synced_) return absl::FailedPreconditionError("cache not synced");
  const uint64_t start = ring_.start_rv();
  if (start <= after_rv) return absl::OkStatus();  // Another fill reached it already.
  if (start > through_rv) return absl::FailedPreconditionError("the window moved on (a relist)");
  // Each object's state before its event, as far as these events (and the state at `after_rv`)
  // tell: null is absent; a key not here is unknown, or absent when the whole state is known.
  absl::flat_hash_map<std::string, ObjectPtr> state;
  if (at_after != nullptr) {
    for (const ObjectPtr& o : *at_after) state.emplace(o->key(), o);
  }
  std::vector<EventPtr> history;
  const Clock::time_point now = now_();
  for (HistoryEvent& e : events) {
    const uint64_t rv = e.object->resource_version();
    if (rv <= after_rv || rv > start) continue;
    ObjectPtr prev;
    bool prev_unknown = false;
    EventType type = e.type;
    if (auto it = state.find(e.object->key()); it != state.end()) {
      prev = it->second;
    } else {
      prev_unknown = at_after == nullptr && type != EventType::kAdded;
    }
    // As Apply names them: an update of an object known absent adds it, and the reverse.
    if (!prev_unknown && type != EventType::kDeleted) {
      type = prev ? EventType::kModified : EventType::kAdded;
    }
    state.insert_or_assign(e.object->key(), type == EventType::kDeleted ? nullptr : e.object);
    history.push_back(std::make_shared<const WatchEvent>(type, std::move(e.object), std::move(prev),
                                                         now, prev_unknown));
  }
  return ring_.InsertHistory(after_rv, std::move(history));
}

absl::Status Cacher::ReplayableLocked(const WatchFilter& filter, uint64_t rv,
                                      const std::vector<EventPtr>& events) const {
  if (!filter.ReadsContent() || ring_.history_through_rv() == 0) return absl::OkStatus();
  for (const EventPtr& e : events) {
    if (e->resource_version() > ring_.history_through_rv()) break;
    // Whether it entered, stayed in or left the selection is unknown.
    if (e->prev_unknown() && e->type() == EventType::kModified) {
      return absl::OutOfRangeError(
          absl::StrCat("too old resource version: ", rv, " (", ring_.history_through_rv(), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kf
