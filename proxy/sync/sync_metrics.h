// The cache side's metric families: a row per cached resource (its Cacher's and Reflector's
// counters, one more row for a protobuf cache once started), warm restart's snapshots.
#ifndef KUBE_FANOUT_SYNC_SYNC_METRICS_H_
#define KUBE_FANOUT_SYNC_SYNC_METRICS_H_

#include "common/metrics_writer.h"
#include "proxy/sync/cached_resources.h"

namespace kf {

// Snapshots (when --cache-snapshot-dir is set), then the resources' rows once the cache started.
void RenderCacheMetrics(metrics::Writer& w, const CachedResources& cache);

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_SYNC_METRICS_H_
