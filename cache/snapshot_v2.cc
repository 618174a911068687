// Version 2 of the snapshot payload (cache/snapshot.h), read so that the files a previous build
// wrote still warm a restart; nothing writes it any more:
//
//   upstream str | written (Unix seconds) i64 | group, version, resource, kind str |
//   namespaced u8 | list_items_have_type_meta u8 | encoding u8 | resourceVersion u64 |
//   window start RV u64 | bookmark template str | object count u64, each str |
//   event count u64, each: type u8, object str, has prev u8, [prev str]
//
// Integers little-endian; str = u64 size + bytes.
#include "absl/status/status.h"
#include "cache/snapshot.h"

namespace kf {
namespace {

// Reads the payload; every read checks what is left.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  bool U64(uint64_t* v) {
    if (rest_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t{static_cast<unsigned char>(rest_[i])} << (8 * i);
    rest_.remove_prefix(8);
    return true;
  }
  bool U32(uint32_t* v) {
    if (rest_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= uint32_t{static_cast<unsigned char>(rest_[i])} << (8 * i);
    rest_.remove_prefix(4);
    return true;
  }
  bool U8(uint8_t* v) {
    if (rest_.empty()) return false;
    *v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return true;
  }
  bool Str(std::string* s) {
    uint64_t n = 0;
    if (!U64(&n) || n > rest_.size()) return false;
    s->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  // A count of items each at least `min_bytes` long: no more than what is left can hold.
  bool Count(uint64_t* n, size_t min_bytes) { return U64(n) && *n <= rest_.size() / min_bytes; }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace

absl::StatusOr<DecodedSnapshot> DecodeSnapshotPayloadV2(std::string_view payload) {
  Reader r(payload);
  DecodedSnapshot s;
  ResourceType& t = s.header.type;
  uint64_t written = 0, objects = 0, events = 0;
  uint8_t namespaced = 0, type_meta = 0, encoding = 0;
  if (!r.Str(&s.header.upstream) || !r.U64(&written) || !r.Str(&t.group) || !r.Str(&t.version) ||
      !r.Str(&t.resource) || !r.Str(&t.kind) || !r.U8(&namespaced) || !r.U8(&type_meta) ||
      !r.U8(&encoding) || encoding > 1 || !r.U64(&s.resource_version) ||
      !r.U64(&s.window_start_rv) || !r.Str(&s.bookmark_template) || !r.Count(&objects, 8)) {
    return SnapshotTruncated();
  }
  s.header.written_unix_seconds = static_cast<int64_t>(written);
  t.namespaced = namespaced != 0;
  t.list_items_have_type_meta = type_meta != 0;
  s.header.encoding = encoding == 1 ? Encoding::kProtobuf : Encoding::kJson;
  s.objects.resize(objects);
  for (std::string& o : s.objects) {
    if (!r.Str(&o)) return SnapshotTruncated();
  }
  if (!r.Count(&events, 10)) return SnapshotTruncated();
  s.events.resize(events);
  for (DecodedSnapshot::Event& e : s.events) {
    uint8_t type = 0, has_prev = 0;
    if (!r.U8(&type) || type > static_cast<uint8_t>(EventType::kDeleted) || !r.Str(&e.object) ||
        !r.U8(&has_prev)) {
      return SnapshotTruncated();
    }
    e.type = static_cast<EventType>(type);
    if (has_prev != 0) {
      e.prev.emplace();
      if (!r.Str(&*e.prev)) return SnapshotTruncated();
    }
  }
  if (!r.empty()) return SnapshotTruncated();
  return s;
}

}  // namespace kf
