// Parsing of the upstream's LIST responses and watch events, in both encodings (JSON, and the
// apiserver's protobuf: kube_proto.h), into raw object bytes, without re-serializing anything:
// kube-fanout keeps the apiserver's own bytes. A watch stream is cut into events by
// watch_framing.h.
#ifndef KUBE_FANOUT_COMMON_API_UPSTREAM_LIST_H_
#define KUBE_FANOUT_COMMON_API_UPSTREAM_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/api/kube_proto.h"

namespace kf {

// --- JSON ------------------------------------------------------------------------------------

struct ListPage {
  uint64_t resource_version = 0;
  std::string continue_token;
  std::string kind;                     // "PodList".
  std::string api_version;              // "v1".
  bool shard_info = false;              // metadata.shardInfo present: the upstream shards.
  std::vector<std::string_view> items;  // Raw bytes of each item, views into the body.
};

// Splits a LIST response body (one page) into its metadata and the raw bytes of each item.
absl::StatusOr<ListPage> ParseListPage(std::string_view body);

// An item of a list in event form: type fields added in front when the item has none, as the
// apiserver's encoder would write the same object in a watch event.
std::string ItemToEventForm(std::string_view item, std::string_view kind,
                            std::string_view api_version);

struct WatchLine {
  std::string type;               // ADDED MODIFIED DELETED BOOKMARK ERROR
  std::string_view object;        // Raw bytes of "object", a view into the line.
  uint64_t resource_version = 0;  // metadata.resourceVersion of the object, if any.
  int error_code = 0;             // For ERROR: the Status's code.
  std::string error_message;
};

// Parses one line of a JSON watch stream ({"type":...,"object":{...}}).
absl::StatusOr<WatchLine> ParseWatchLine(std::string_view line);

// --- Protobuf --------------------------------------------------------------------------------

struct ProtoListPage {
  std::string api_version;
  std::string kind;  // "PodList".
  uint64_t resource_version = 0;
  std::string continue_token;
  bool shard_info = false;              // ListMeta.shardInfo (field 5) present.
  std::vector<std::string_view> items;  // Each item's message, into the body.
};
// Parses a LIST body; false when malformed.
bool ParseProtoList(std::string_view body, ProtoListPage* out);

struct ProtoWatchEvent {
  std::string_view type;             // "ADDED", "BOOKMARK", "ERROR", ...
  UnknownView object;                // The object's envelope, read.
  std::string_view object_envelope;  // The envelope's bytes.
};
// Parses one watch frame's message (after its length); false when malformed.
bool ParseProtoWatchEvent(std::string_view message, ProtoWatchEvent* out);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_UPSTREAM_LIST_H_
