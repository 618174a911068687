// WatchEvent: one change to one object, as the cache received it from upstream. Immutable and
// shared by every watcher that receives it. Its wire form is never built per watcher: a frame
// is a few pieces (a constant prefix naming the type, the object's upstream bytes, a constant
// suffix) that a session writes with one gathered write.
#ifndef KUBE_FANOUT_CACHE_WATCH_EVENT_H_
#define KUBE_FANOUT_CACHE_WATCH_EVENT_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "cache/cached_object.h"

namespace kf {

enum class EventType { kAdded, kModified, kDeleted };

// A view of bytes kept alive by `owner` (null for static data).
struct Piece {
  std::shared_ptr<const void> owner;
  std::string_view bytes;
};

class WatchEvent {
 public:
  // `object` is the new state; for kDeleted the last state with the deletion's RV. `prev` is the
  // state before (null for kAdded). `prev_unknown`: an event of history filled in from the
  // upstream (Cacher::InsertHistory) whose state before is not known; `prev` is then null.
  WatchEvent(EventType type, ObjectPtr object, ObjectPtr prev,
             std::chrono::steady_clock::time_point received, bool prev_unknown = false)
      : type_(type),
        object_(std::move(object)),
        prev_(std::move(prev)),
        received_(received),
        prev_unknown_(prev_unknown) {}

  EventType type() const { return type_; }
  uint64_t resource_version() const { return object_->resource_version(); }
  const ObjectPtr& object() const { return object_; }
  const ObjectPtr& prev() const { return prev_; }
  bool prev_unknown() const { return prev_unknown_; }
  std::chrono::steady_clock::time_point received() const { return received_; }
  size_t size_bytes() const { return object_->json().size(); }

  // The previous state with metadata.resourceVersion set to this event's RV: what a watcher
  // whose selector the object just left receives as DELETED. Built once, on first use.
  ObjectPtr PrevAtEventVersion() const;

 private:
  EventType type_;
  ObjectPtr object_;
  ObjectPtr prev_;
  std::chrono::steady_clock::time_point received_;
  bool prev_unknown_;
  mutable std::once_flag prev_at_rv_once_;
  mutable ObjectPtr prev_at_rv_;
};

using EventPtr = std::shared_ptr<const WatchEvent>;

// The frame {"type":"<TYPE>","object":<object>}\n (or its protobuf form), as three pieces
// referencing the object: built on the stack per delivery, never on the heap.
using FramePieces = std::array<Piece, 3>;
FramePieces Frame(std::string_view type, const ObjectPtr& object);
// The object a frame carries (its second piece holds it).
inline const CachedObject* FrameObject(const FramePieces& frame) {
  return static_cast<const CachedObject*>(frame[1].owner.get());
}
// What precedes an object's CBOR (without its self-described tag) in an application/cbor-seq
// watch frame of `type` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).
std::string_view CborFramePrefix(std::string_view type);
// Appends Frame(type, object) to `out`.
void AppendFrame(std::string_view type, const ObjectPtr& object, std::vector<Piece>* out);

std::string_view EventTypeName(EventType type);
// The type a watch event's "type" names (ADDED, DELETED; anything else MODIFIED).
EventType EventTypeNamed(std::string_view name);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_WATCH_EVENT_H_
