// The upstream side's metric families: reviews sent and answered from their caches, pooled
// connections (review_stats.h, upstream_pool.h).
#ifndef KUBE_FANOUT_UPSTREAM_UPSTREAM_METRICS_H_
#define KUBE_FANOUT_UPSTREAM_UPSTREAM_METRICS_H_

#include "common/metrics_writer.h"
#include "proxy/upstream/review_stats.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

// TokenReviews and SubjectAccessReviews: sent (by result) and answered from the caches.
void RenderReviewMetrics(metrics::Writer& w, const ReviewStats& authentication,
                         const ReviewStats& authorization);

// Pooled upstream connections the upstream closed while they were idle, by when that was found;
// the HTTP/2 connections passthrough requests share (--upstream-http2).
void RenderUpstreamPoolMetrics(metrics::Writer& w, const UpstreamPoolStats& pools);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_UPSTREAM_METRICS_H_
