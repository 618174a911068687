// What a LIST page holds, as the cache compares it with its own state: each item's store key
// and resourceVersion, for Cacher::ProveCurrent and the self-check.
#ifndef KUBE_FANOUT_CACHE_LISTED_VERSIONS_H_
#define KUBE_FANOUT_CACHE_LISTED_VERSIONS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "cache/cacher.h"
#include "common/api/upstream_list.h"

namespace kf {

// Each item's store key and resourceVersion (from its metadata: any list, including a
// PartialObjectMetadataList), for Cacher::ProveCurrent.
absl::StatusOr<std::vector<Cacher::Listed>> ListedVersions(const ListPage& page);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_LISTED_VERSIONS_H_
