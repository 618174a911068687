#include "cache/watch_event.h"

#include "common/api/kube_proto.h"

namespace kf {

ObjectPtr WatchEvent::PrevAtEventVersion() const {
  std::call_once(prev_at_rv_once_, [this] {
    if (prev_ != nullptr) prev_at_rv_ = prev_->WithResourceVersion(resource_version());
  });
  return prev_at_rv_;
}

std::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "MODIFIED";
}

EventType EventTypeNamed(std::string_view name) {
  if (name == "ADDED") return EventType::kAdded;
  if (name == "DELETED") return EventType::kDeleted;
  return EventType::kModified;
}

std::string_view CborFramePrefix(std::string_view type) {
  // A self-described map {"type": TYPE, "object": <self-described object>}, the apiserver's
  // application/cbor-seq watch frame (the object follows).
#define KF_CBOR_FRAME(length, name) "\xd9\xd9\xf7\xa2\x44type" length name "\x46object\xd9\xd9\xf7"
  static constexpr std::string_view kAdded = KF_CBOR_FRAME("\x45", "ADDED");
  static constexpr std::string_view kModified = KF_CBOR_FRAME("\x48", "MODIFIED");
  static constexpr std::string_view kDeleted = KF_CBOR_FRAME("\x47", "DELETED");
  static constexpr std::string_view kBookmark = KF_CBOR_FRAME("\x48", "BOOKMARK");
  static constexpr std::string_view kError = KF_CBOR_FRAME("\x45", "ERROR");
#undef KF_CBOR_FRAME
  return type == "ADDED"      ? kAdded
         : type == "MODIFIED" ? kModified
         : type == "DELETED"  ? kDeleted
         : type == "ERROR"    ? kError
                              : kBookmark;
}

FramePieces Frame(std::string_view type, const ObjectPtr& object) {
  if (object->encoding() == Encoding::kCbor) {
    return {Piece{nullptr, CborFramePrefix(type)}, Piece{object, object->bytes()},
            Piece{nullptr, std::string_view()}};
  }
  if (object->encoding() == Encoding::kProtobuf) {
    // Length, type and envelope head (kept by the object), the message, the envelope's tail.
    const int index = type == "ADDED" ? 0 : type == "MODIFIED" ? 1 : 2;
    return {Piece{object, object->proto_frame_head(index)}, Piece{object, object->bytes()},
            Piece{nullptr, kUnknownTail}};
  }
  // Go's json.Encoder writes metav1.WatchEvent as {"type":...,"object":...} and a newline.
  static constexpr std::string_view kAdded = "{\"type\":\"ADDED\",\"object\":";
  static constexpr std::string_view kModified = "{\"type\":\"MODIFIED\",\"object\":";
  static constexpr std::string_view kDeleted = "{\"type\":\"DELETED\",\"object\":";
  static constexpr std::string_view kBookmark = "{\"type\":\"BOOKMARK\",\"object\":";
  static constexpr std::string_view kEnd = "}\n";
  std::string_view prefix = type == "ADDED"      ? kAdded
                            : type == "MODIFIED" ? kModified
                            : type == "DELETED"  ? kDeleted
                                                 : kBookmark;
  return {Piece{nullptr, prefix}, Piece{object, object->json()}, Piece{nullptr, kEnd}};
}

void AppendFrame(std::string_view type, const ObjectPtr& object, std::vector<Piece>* out) {
  for (Piece& p : Frame(type, object)) out->push_back(std::move(p));
}

}  // namespace kf
