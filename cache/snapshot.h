// Snapshot: the file format of one cached resource's state for a warm restart
// (--cache-snapshot-dir): its objects at one resourceVersion and its event window, as the
// upstream's own bytes, with what the cache knows of its type and where it came from.
//
//   "KFSNAP\r\n" (8 bytes) | version u32 | CRC-32 (zlib) of the payload u32 | payload size u64
//   payload: upstream str | written (Unix seconds) i64 | group, version, resource, kind str |
//            namespaced u8 | list_items_have_type_meta u8 | encoding u8 |
//            resourceVersion u64 | window start RV u64 | bookmark template str |
//            object count u64, each str | event count u64, each: type u8, object str,
//            has prev u8, [prev str]
// encoding: 0 JSON, 1 protobuf (the objects' bytes are then their protobuf messages).
// Integers little-endian; str = u64 size + bytes. A reader checks every size against what is
// left, so no input makes it read past the end or allocate more than the file's size.
//
// Pure functions, no I/O: files are proxy/sync/snapshot_store.h's.
#ifndef KUBE_FANOUT_CACHE_SNAPSHOT_H_
#define KUBE_FANOUT_CACHE_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/cacher.h"

namespace kf {

// 2: the encoding byte (version 1 files, JSON only, are ignored as `version`).
inline constexpr uint32_t kSnapshotVersion = 2;

struct SnapshotHeader {
  std::string upstream;  // The upstream the state came from (its endpoints' URLs).
  int64_t written_unix_seconds = 0;
  ResourceType type;
  Encoding encoding = Encoding::kJson;  // The cache's: how its objects' bytes are encoded.
};

// Encodes `state` with `header`. When the whole would exceed `max_bytes`, the window's oldest
// events are left out (the window then starts later); ResourceExhausted when the objects alone
// exceed it.
absl::StatusOr<std::string> EncodeSnapshot(const SnapshotHeader& header, const Cacher::State& state,
                                           size_t max_bytes);

struct DecodedSnapshot {
  SnapshotHeader header;
  uint64_t resource_version = 0;
  uint64_t window_start_rv = 0;
  std::string bookmark_template;
  std::vector<std::string> objects;
  struct Event {
    EventType type = EventType::kAdded;
    std::string object;
    std::optional<std::string> prev;
  };
  std::vector<Event> events;
};

// DataLoss: not a snapshot, truncated, or its checksum does not match (a bit flipped, a torn
// write); FailedPrecondition: another format version.
absl::StatusOr<DecodedSnapshot> DecodeSnapshot(std::string_view bytes);

// The cache state the decoded snapshot describes, its objects parsed as `type`'s in the
// snapshot's encoding (an object
// and the same version's previous state in a later event share one CachedObject).
absl::StatusOr<Cacher::State> SnapshotToState(DecodedSnapshot snapshot);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_SNAPSHOT_H_
