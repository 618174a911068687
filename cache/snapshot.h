// Snapshot: the file format of one cached resource's state for a warm restart
// (--cache-snapshot-dir): its objects at one resourceVersion and its event window, as the
// upstream's own bytes, with what the cache knows of its type and where it came from.
//
//   "KFSNAP\r\n" (8 bytes) | version u32 | CRC-32 (zlib) of the payload u32 | payload size u64
//
// (integers little-endian), then the payload: version 3, a protocol-buffer message
// (common/api/protowire.h), its fields by number:
//
//   message Snapshot {
//     string upstream = 1;  int64 written_unix_seconds = 2;
//     string group = 3;  string version = 4;  string resource = 5;  string kind = 6;
//     bool namespaced = 7;  bool list_items_have_type_meta = 8;
//     uint32 encoding = 9;  // 0 JSON, 1 protobuf (the objects' bytes are their messages)
//     uint64 resource_version = 10;  uint64 window_start_rv = 11;
//     bytes bookmark_template = 12;
//     repeated bytes objects = 13;
//     repeated Event events = 14;  // oldest first
//   }
//   message Event { uint32 type = 1; bytes object = 2; optional bytes prev = 3; }
//
// A field this build does not know is skipped, so a later build can add fields and this one
// still reads its files; a payload is at most 2 GiB (a protobuf message's bound). Version 2
// files (a fixed layout, cache/snapshot_v2.cc) are still read. The reader never reads past the
// end nor holds more than the file's bytes.
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

// 3: the payload as a protocol-buffer message. 2 (a fixed layout) is read too; 1 (JSON only)
// is ignored as another version.
inline constexpr uint32_t kSnapshotVersion = 3;
inline constexpr uint32_t kSnapshotVersionFixedLayout = 2;

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
// A version 2 payload (snapshot_v2.cc); DataLoss when malformed.
absl::StatusOr<DecodedSnapshot> DecodeSnapshotPayloadV2(std::string_view payload);
// The DataLoss of a snapshot cut short or malformed.
absl::Status SnapshotTruncated();

// The cache state the decoded snapshot describes, its objects parsed as `type`'s in the
// snapshot's encoding (an object
// and the same version's previous state in a later event share one CachedObject).
absl::StatusOr<Cacher::State> SnapshotToState(DecodedSnapshot snapshot);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_SNAPSHOT_H_
