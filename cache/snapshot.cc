#include "cache/snapshot.h"

#include <zlib.h>

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kf {
namespace {

constexpr std::string_view kMagic("KFSNAP\r\n", 8);
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 4);
}
void PutStr(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s);
}
size_t StrBytes(std::string_view s) { return 8 + s.size(); }
size_t EventBytes(const WatchEvent& e) {
  return 1 + StrBytes(e.object()->bytes()) + 1 + (e.prev() ? StrBytes(e.prev()->bytes()) : 0);
}

uint32_t Crc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed it in pieces.
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

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

absl::Status Truncated() { return absl::DataLossError("snapshot truncated or malformed"); }

}  // namespace

absl::StatusOr<std::string> EncodeSnapshot(const SnapshotHeader& header, const Cacher::State& state,
                                           size_t max_bytes) {
  const ResourceType& t = header.type;
  size_t fixed = kHeaderBytes + StrBytes(header.upstream) + 8 + StrBytes(t.group) +
                 StrBytes(t.version) + StrBytes(t.resource) + StrBytes(t.kind) + 3 + 8 + 8 +
                 StrBytes(state.bookmark_template) + 8 + 8;
  for (const ObjectPtr& o : state.objects) fixed += StrBytes(o->bytes());
  if (fixed > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "snapshot of ", t.GroupResource(), ": objects need ", fixed, " bytes, limit ", max_bytes));
  }
  // The newest events that fit; the window then starts at the last one left out.
  size_t first = state.events.size();
  size_t total = fixed;
  while (first > 0 && total + EventBytes(*state.events[first - 1]) <= max_bytes) {
    total += EventBytes(*state.events[--first]);
  }
  const uint64_t window_start =
      first == 0 ? state.window_start_rv : state.events[first - 1]->resource_version();

  std::string payload;
  payload.reserve(total - kHeaderBytes);
  PutStr(&payload, header.upstream);
  PutU64(&payload, static_cast<uint64_t>(header.written_unix_seconds));
  PutStr(&payload, t.group);
  PutStr(&payload, t.version);
  PutStr(&payload, t.resource);
  PutStr(&payload, t.kind);
  payload.push_back(t.namespaced ? 1 : 0);
  payload.push_back(t.list_items_have_type_meta ? 1 : 0);
  payload.push_back(header.encoding == Encoding::kProtobuf ? 1 : 0);
  PutU64(&payload, state.resource_version);
  PutU64(&payload, window_start);
  PutStr(&payload, state.bookmark_template);
  PutU64(&payload, state.objects.size());
  for (const ObjectPtr& o : state.objects) PutStr(&payload, o->bytes());
  PutU64(&payload, state.events.size() - first);
  for (size_t i = first; i < state.events.size(); ++i) {
    const WatchEvent& e = *state.events[i];
    payload.push_back(static_cast<char>(e.type()));
    PutStr(&payload, e.object()->bytes());
    payload.push_back(e.prev() ? 1 : 0);
    if (e.prev()) PutStr(&payload, e.prev()->bytes());
  }
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  out.append(kMagic);
  PutU32(&out, kSnapshotVersion);
  PutU32(&out, Crc32(payload));
  PutU64(&out, payload.size());
  out.append(payload);
  return out;
}

absl::StatusOr<DecodedSnapshot> DecodeSnapshot(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes || bytes.substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError("not a kube-fanout snapshot (no magic)");
  }
  Reader head(bytes.substr(kMagic.size(), kHeaderBytes - kMagic.size()));
  uint32_t version = 0, crc = 0;
  uint64_t size = 0;
  head.U32(&version);
  head.U32(&crc);
  head.U64(&size);
  if (version != kSnapshotVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot format version ", version, ", this build reads ", kSnapshotVersion));
  }
  const std::string_view payload = bytes.substr(kHeaderBytes);
  if (payload.size() != size) {
    return absl::DataLossError(absl::StrCat("snapshot truncated: payload of ", payload.size(),
                                            " bytes, header says ", size));
  }
  if (Crc32(payload) != crc) return absl::DataLossError("snapshot checksum mismatch");

  Reader r(payload);
  DecodedSnapshot s;
  ResourceType& t = s.header.type;
  uint64_t written = 0, objects = 0, events = 0;
  uint8_t namespaced = 0, type_meta = 0, encoding = 0;
  if (!r.Str(&s.header.upstream) || !r.U64(&written) || !r.Str(&t.group) || !r.Str(&t.version) ||
      !r.Str(&t.resource) || !r.Str(&t.kind) || !r.U8(&namespaced) || !r.U8(&type_meta) ||
      !r.U8(&encoding) || encoding > 1 || !r.U64(&s.resource_version) ||
      !r.U64(&s.window_start_rv) || !r.Str(&s.bookmark_template) || !r.Count(&objects, 8)) {
    return Truncated();
  }
  s.header.written_unix_seconds = static_cast<int64_t>(written);
  t.namespaced = namespaced != 0;
  t.list_items_have_type_meta = type_meta != 0;
  s.header.encoding = encoding == 1 ? Encoding::kProtobuf : Encoding::kJson;
  s.objects.resize(objects);
  for (std::string& o : s.objects) {
    if (!r.Str(&o)) return Truncated();
  }
  if (!r.Count(&events, 10)) return Truncated();
  s.events.resize(events);
  for (DecodedSnapshot::Event& e : s.events) {
    uint8_t type = 0, has_prev = 0;
    if (!r.U8(&type) || type > static_cast<uint8_t>(EventType::kDeleted) || !r.Str(&e.object) ||
        !r.U8(&has_prev)) {
      return Truncated();
    }
    e.type = static_cast<EventType>(type);
    if (has_prev != 0) {
      e.prev.emplace();
      if (!r.Str(&*e.prev)) return Truncated();
    }
  }
  if (!r.empty()) return Truncated();
  return s;
}

absl::StatusOr<Cacher::State> SnapshotToState(DecodedSnapshot snapshot) {
  const ResourceType& type = snapshot.header.type;
  // One CachedObject per (key, RV): the window's states are mostly the store's or each other's.
  absl::flat_hash_map<std::string, ObjectPtr> seen;
  const bool protobuf = snapshot.header.encoding == Encoding::kProtobuf;
  auto parse = [&](std::string bytes) -> absl::StatusOr<ObjectPtr> {
    auto obj = protobuf ? CachedObject::FromProtobuf(type, std::move(bytes))
                        : CachedObject::FromJson(type, std::move(bytes));
    if (!obj.ok()) return obj.status();
    const std::string id = absl::StrCat((*obj)->key(), "@", (*obj)->resource_version());
    auto [it, added] = seen.try_emplace(id, *obj);
    return it->second;
  };
  Cacher::State state;
  state.resource_version = snapshot.resource_version;
  state.window_start_rv = snapshot.window_start_rv;
  state.bookmark_template = std::move(snapshot.bookmark_template);
  for (std::string& json : snapshot.objects) {
    auto obj = parse(std::move(json));
    if (!obj.ok()) return obj.status();
    state.objects.push_back(*std::move(obj));
  }
  const auto now = std::chrono::steady_clock::now();
  for (DecodedSnapshot::Event& e : snapshot.events) {
    auto obj = parse(std::move(e.object));
    if (!obj.ok()) return obj.status();
    ObjectPtr prev;
    if (e.prev) {
      auto p = parse(std::move(*e.prev));
      if (!p.ok()) return p.status();
      prev = *std::move(p);
    }
    state.events.push_back(
        std::make_shared<const WatchEvent>(e.type, *std::move(obj), std::move(prev), now));
  }
  return state;
}

}  // namespace kf
