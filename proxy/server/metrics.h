// Metrics: kube-fanout's /metrics in the Prometheus text format (version 0.0.4), rendered on
// demand from the counters each component keeps (no global registry).
#ifndef KUBE_FANOUT_SERVER_METRICS_H_
#define KUBE_FANOUT_SERVER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "proxy/edge/exchange.h"
#include "proxy/serve/gzip_cache.h"
#include "proxy/upstream/review_stats.h"
#include "proxy/upstream/upstream_pool.h"
#include "ratelimit/admission.h"

namespace kf {

class CachedResources;
class Coalescer;
class QueueBudget;
class WatchSlots;
namespace ratelimit {
class EventSpamFilter;
}
struct CacheServeStats;

std::string RenderMetrics(const CachedResources* cache, const CacheServeStats& serve,
                          const RouteStats& routes, int64_t open_connections);

// Admission by flow schema and priority level (names follow the apiserver's
// apiserver_flowcontrol_* families), and the passthrough cap.
std::string RenderAdmissionMetrics(const ratelimit::Admission& admission,
                                   int64_t passthrough_in_flight, uint64_t passthrough_rejected);

// Coalesced passthrough reads and the Event spam filter's verdicts (null: off).
std::string RenderFilterMetrics(const Coalescer* coalescer,
                                const ratelimit::EventSpamFilter* event_filter);

// TokenReviews and SubjectAccessReviews: sent (by result) and answered from the caches.
std::string RenderReviewMetrics(const ReviewStats& authentication,
                                const ReviewStats& authorization);
// The process_* families every Prometheus client library exports (resident memory, CPU
// seconds, open and maximum descriptors, start time), read from /proc/self; empty where /proc
// cannot be read.
std::string RenderProcessMetrics();

// The process-wide watch bounds: bytes queued to all watchers (--watchers-max-total-queue-bytes),
// cached watches open and refused (--max-watchers, --max-watchers-per-user); passthrough
// watches and tunnels open and refused (--max-passthrough-watches[-per-user]).
std::string RenderWatchLimitMetrics(const QueueBudget& queues, const WatchSlots& slots,
                                    const WatchSlots& passthrough);

// New connections refused at accept: descriptor headroom, failed accepts.
std::string RenderConnectionsRefusedMetrics(uint64_t fd_headroom, uint64_t accept_errors,
                                            uint64_t accept_pauses);

// --secure-listen's certificate: reloads, rejected new files, the served one's expiry.
std::string RenderServingCertificateMetrics(uint64_t reloads, uint64_t failures, int64_t not_after);

// Large LISTs' compressed answers (--list-gzip-cache-bytes): shared or compressed, kept bytes,
// evictions.
std::string RenderListGzipMetrics(const GzipCache::Stats& gzip);

// Pooled upstream connections the upstream closed while they were idle, by when that was found.
std::string RenderUpstreamPoolMetrics(const UpstreamPoolStats& pools);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_METRICS_H_
