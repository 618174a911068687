// The metric families of the cache's request side: reads served (serve_stats.h), watch writes,
// compressed LISTs (gzip_cache.h), the process-wide watch bounds.
#ifndef KUBE_FANOUT_SERVE_SERVE_METRICS_H_
#define KUBE_FANOUT_SERVE_SERVE_METRICS_H_

#include "cache/queue_budget.h"
#include "common/metrics_writer.h"
#include "proxy/serve/gzip_cache.h"
#include "proxy/serve/serve_stats.h"
#include "ratelimit/watch_slots.h"

namespace kf {

// Reads answered from the cache, refused, or passed through.
void RenderServeMetrics(metrics::Writer& w, const CacheServeStats& serve);

// Watch writes by path, io_uring batches, bytes written from the cache.
void RenderWatchWriteMetrics(metrics::Writer& w, const CacheServeStats& serve);

// The process-wide watch bounds: bytes queued to all watchers (--watchers-max-total-queue-bytes),
// cached watches open and refused (--max-watchers, --max-watchers-per-user); passthrough
// watches and tunnels open and refused (--max-passthrough-watches[-per-user]).
void RenderWatchLimitMetrics(metrics::Writer& w, const QueueBudget& queues, const WatchSlots& slots,
                             const WatchSlots& passthrough);

// Large LISTs' compressed answers (--list-gzip-cache-bytes): shared or compressed, kept bytes,
// evictions.
void RenderListGzipMetrics(metrics::Writer& w, const GzipCache::Stats& gzip);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_SERVE_METRICS_H_
