#include "cache/snapshot.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/api/protowire.h"

namespace kf {
namespace {

constexpr std::string_view kMagic("KFSNAP\r\n", 8);
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
// A protobuf message's bound (common/api/protowire.h reads no more).
constexpr size_t kMaxPayload = INT32_MAX;

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
// Snapshot's fields (snapshot.h).
enum Field : int {
  kUpstream = 1,
  kWritten = 2,
  kGroup = 3,
  kVersion = 4,
  kResource = 5,
  kKind = 6,
  kNamespaced = 7,
  kTypeMeta = 8,
  kEncoding = 9,
  kResourceVersion = 10,
  kWindowStart = 11,
  kBookmarkTemplate = 12,
  kObject = 13,
  kEvent = 14,
};
// Event's.
enum EventField : int { kEventType = 1, kEventObject = 2, kEventPrev = 3 };

// Tags of fields 1-15 take one byte.
size_t BytesFieldSize(size_t n) { return 1 + VarintSize(n) + n; }
size_t VarintFieldSize(uint64_t v) { return 1 + VarintSize(v); }
size_t EventMessageSize(const WatchEvent& e) {
  return VarintFieldSize(static_cast<uint64_t>(e.type())) +
         BytesFieldSize(e.object()->bytes().size()) +
         (e.prev() ? BytesFieldSize(e.prev()->bytes().size()) : 0);
}
size_t EventBytes(const WatchEvent& e) { return BytesFieldSize(EventMessageSize(e)); }

// `n` bytes little-endian at the start of `bytes` (which holds them).
uint64_t GetLe(std::string_view bytes, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return v;
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

}  // namespace

absl::Status SnapshotTruncated() { return absl::DataLossError("snapshot truncated or malformed"); }

absl::StatusOr<std::string> EncodeSnapshot(const SnapshotHeader& header, const Cacher::State& state,
                                           size_t max_bytes) {
  max_bytes = std::min<size_t>(max_bytes, kHeaderBytes + kMaxPayload);
  const ResourceType& t = header.type;
  const uint64_t encoding = header.encoding == Encoding::kProtobuf ? 1 : 0;
  size_t fixed = kHeaderBytes + BytesFieldSize(header.upstream.size()) +
                 VarintFieldSize(static_cast<uint64_t>(header.written_unix_seconds)) +
                 BytesFieldSize(t.group.size()) + BytesFieldSize(t.version.size()) +
                 BytesFieldSize(t.resource.size()) + BytesFieldSize(t.kind.size()) +
                 3 * VarintFieldSize(1) + VarintFieldSize(state.resource_version) +
                 VarintFieldSize(state.window_start_rv) +
                 BytesFieldSize(state.bookmark_template.size());
  // The window's start may move later (events left out): its varint at most 10 bytes.
  fixed += 10;
  for (const ObjectPtr& o : state.objects) fixed += BytesFieldSize(o->bytes().size());
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
  AppendBytesField(&payload, kUpstream, header.upstream);
  AppendVarintField(&payload, kWritten, static_cast<uint64_t>(header.written_unix_seconds));
  AppendBytesField(&payload, kGroup, t.group);
  AppendBytesField(&payload, kVersion, t.version);
  AppendBytesField(&payload, kResource, t.resource);
  AppendBytesField(&payload, kKind, t.kind);
  AppendVarintField(&payload, kNamespaced, t.namespaced ? 1 : 0);
  AppendVarintField(&payload, kTypeMeta, t.list_items_have_type_meta ? 1 : 0);
  AppendVarintField(&payload, kEncoding, encoding);
  AppendVarintField(&payload, kResourceVersion, state.resource_version);
  AppendVarintField(&payload, kWindowStart, window_start);
  AppendBytesField(&payload, kBookmarkTemplate, state.bookmark_template);
  for (const ObjectPtr& o : state.objects) AppendBytesField(&payload, kObject, o->bytes());
  for (size_t i = first; i < state.events.size(); ++i) {
    const WatchEvent& e = *state.events[i];
    AppendTag(&payload, kEvent, WireType::kBytes);
    AppendVarint(&payload, EventMessageSize(e));
    AppendVarintField(&payload, kEventType, static_cast<uint64_t>(e.type()));
    AppendBytesField(&payload, kEventObject, e.object()->bytes());
    if (e.prev()) AppendBytesField(&payload, kEventPrev, e.prev()->bytes());
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

namespace {

// The fields of one Event message; false when malformed.
bool DecodeEvent(std::string_view message, DecodedSnapshot::Event* e) {
  ProtoReader r(message);
  ProtoField f;
  bool has_object = false;
  while (r.Next(&f)) {
    const bool bytes = f.type == WireType::kBytes;
    if (f.number == kEventType && f.type == WireType::kVarint) {
      if (f.varint > static_cast<uint64_t>(EventType::kDeleted)) return false;
      e->type = static_cast<EventType>(f.varint);
    } else if (f.number == kEventObject && bytes) {
      e->object.assign(f.bytes);
      has_object = true;
    } else if (f.number == kEventPrev && bytes) {
      e->prev.emplace(f.bytes);
    }
  }
  return r.ok() && has_object;
}

// One field of the Snapshot message into `s`; false when it is malformed.
bool DecodeField(const ProtoField& f, DecodedSnapshot* s) {
  ResourceType& t = s->header.type;
  if (f.type == WireType::kBytes) {
    switch (f.number) {
      case kUpstream:
        s->header.upstream.assign(f.bytes);
        return true;
      case kGroup:
        t.group.assign(f.bytes);
        return true;
      case kVersion:
        t.version.assign(f.bytes);
        return true;
      case kResource:
        t.resource.assign(f.bytes);
        return true;
      case kKind:
        t.kind.assign(f.bytes);
        return true;
      case kBookmarkTemplate:
        s->bookmark_template.assign(f.bytes);
        return true;
      case kObject:
        s->objects.emplace_back(f.bytes);
        return true;
      case kEvent:
        return DecodeEvent(f.bytes, &s->events.emplace_back());
      default:
        return true;  // A later build's field.
    }
  }
  if (f.type != WireType::kVarint) return true;
  switch (f.number) {
    case kWritten:
      s->header.written_unix_seconds = static_cast<int64_t>(f.varint);
      return true;
    case kNamespaced:
      t.namespaced = f.varint != 0;
      return true;
    case kTypeMeta:
      t.list_items_have_type_meta = f.varint != 0;
      return true;
    case kEncoding:
      if (f.varint > 1) return false;
      s->header.encoding = f.varint == 1 ? Encoding::kProtobuf : Encoding::kJson;
      return true;
    case kResourceVersion:
      s->resource_version = f.varint;
      return true;
    case kWindowStart:
      s->window_start_rv = f.varint;
      return true;
    default:
      return true;
  }
}

absl::StatusOr<DecodedSnapshot> DecodePayload(std::string_view payload) {
  DecodedSnapshot s;
  ProtoReader r(payload);
  ProtoField f;
  while (r.Next(&f)) {
    if (!DecodeField(f, &s)) return SnapshotTruncated();
  }
  if (!r.ok()) return SnapshotTruncated();
  return s;
}

}  // namespace

absl::StatusOr<DecodedSnapshot> DecodeSnapshot(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes || bytes.substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError("not a kube-fanout snapshot (no magic)");
  }
  const uint32_t version = static_cast<uint32_t>(GetLe(bytes.substr(8), 4));
  const uint32_t crc = static_cast<uint32_t>(GetLe(bytes.substr(12), 4));
  const uint64_t size = GetLe(bytes.substr(16), 8);
  if (version != kSnapshotVersion && version != kSnapshotVersionFixedLayout) {
    return absl::FailedPreconditionError(absl::StrCat("snapshot format version ", version,
                                                      ", this build reads ", kSnapshotVersion,
                                                      " and ", kSnapshotVersionFixedLayout));
  }
  const std::string_view payload = bytes.substr(kHeaderBytes);
  if (payload.size() != size) {
    return absl::DataLossError(absl::StrCat("snapshot truncated: payload of ", payload.size(),
                                            " bytes, header says ", size));
  }
  if (Crc32(payload) != crc) return absl::DataLossError("snapshot checksum mismatch");
  if (version == kSnapshotVersionFixedLayout) return DecodeSnapshotPayloadV2(payload);
  return DecodePayload(payload);
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
