// Parsing of the upstream's LIST responses and watch event lines into raw object bytes,
// without re-serializing anything: kube-fanout keeps the apiserver's own bytes.
#ifndef KUBE_FANOUT_CACHE_UPSTREAM_LIST_H_
#define KUBE_FANOUT_CACHE_UPSTREAM_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/cached_object.h"
#include "cache/cacher.h"

namespace kf {

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

// Each item's store key and resourceVersion (from its metadata: any list, including a
// PartialObjectMetadataList), for Cacher::ProveCurrent.
absl::StatusOr<std::vector<Cacher::Listed>> ListedVersions(const ListPage& page);

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

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_UPSTREAM_LIST_H_
