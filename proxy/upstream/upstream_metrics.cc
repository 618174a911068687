#include "proxy/upstream/upstream_metrics.h"

namespace kf {

void RenderReviewMetrics(metrics::Writer& w, const ReviewStats& authentication,
                         const ReviewStats& authorization) {
  const auto load = [](const std::atomic<uint64_t>& c) {
    return static_cast<double>(c.load(std::memory_order_relaxed));
  };
  w.Family("kube_fanout_token_reviews_total", "counter",
           "TokenReviews kube-fanout sent to the upstream, by answer (authenticated, "
           "unauthenticated, error: no answer or refused).");
  w.Sample("kube_fanout_token_reviews_total", "result=\"authenticated\"",
           load(authentication.allowed));
  w.Sample("kube_fanout_token_reviews_total", "result=\"unauthenticated\"",
           load(authentication.denied));
  w.Sample("kube_fanout_token_reviews_total", "result=\"error\"", load(authentication.errors));
  w.Single("kube_fanout_token_reviews_throttled_total", "counter",
           "Bearer tokens left unreviewed because the budget for new TokenReviews "
           "(--authentication-token-review-qps) was spent: treated as unknown.",
           load(authentication.throttled));
  w.Single("kube_fanout_token_review_cache_hits_total", "counter",
           "Bearer tokens authenticated from the cache of TokenReview answers.",
           load(authentication.cache_hits));
  w.Family("kube_fanout_access_reviews_total", "counter",
           "SubjectAccessReviews kube-fanout sent to the upstream for cached reads, by answer "
           "(allowed, denied, error: no answer or refused).");
  w.Sample("kube_fanout_access_reviews_total", "result=\"allowed\"", load(authorization.allowed));
  w.Sample("kube_fanout_access_reviews_total", "result=\"denied\"", load(authorization.denied));
  w.Sample("kube_fanout_access_reviews_total", "result=\"error\"", load(authorization.errors));
  w.Single("kube_fanout_access_review_cache_hits_total", "counter",
           "Cached-read authorizations answered from the cache of SubjectAccessReview answers.",
           load(authorization.cache_hits));
  w.Single("kube_fanout_access_reviews_shared_total", "counter",
           "Cached-read authorizations of node identities answered by the probe node's allowed "
           "review of the same request shape (--authorization-share-node-reviews), no review of "
           "their own sent.",
           load(authorization.shared));
}

void RenderUpstreamPoolMetrics(metrics::Writer& w, const UpstreamPoolStats& pools) {
  w.ByLabel("kube_fanout_upstream_pool_stale_total", "counter",
            "Idle keep-alive connections to the upstream that it had closed, by when that was "
            "found (idle: when taken from the pool, before any request was written to it, and "
            "a new connection was used instead; in_use: a reused connection failed under its "
            "request, which was sent again on a new connection if it had no body; a passed-through "
            "request with a body was answered 503).",
            "found",
            {{"idle", static_cast<double>(pools.stale_idle.load(std::memory_order_relaxed))},
             {"in_use", static_cast<double>(pools.stale_in_use.load(std::memory_order_relaxed))}});
  const Http2UpstreamStats& h2 = pools.http2;
  w.Single(
      "kube_fanout_upstream_http2_connections", "gauge",
      "Open HTTP/2 connections to the upstream carrying passthrough requests (--upstream-http2), "
      "each shared by up to the upstream's stream limit.",
      static_cast<double>(h2.connections.load(std::memory_order_relaxed)));
  w.Single("kube_fanout_upstream_http2_streams", "gauge",
           "Passthrough requests open on the upstream's HTTP/2 connections.",
           static_cast<double>(h2.streams.load(std::memory_order_relaxed)));
  w.Single("kube_fanout_upstream_http2_dials_total", "counter",
           "HTTP/2 connections dialed to the upstream.",
           static_cast<double>(h2.dialed.load(std::memory_order_relaxed)));
  w.Single("kube_fanout_upstream_http2_lost_total", "counter",
           "HTTP/2 connections to the upstream that ended with streams open (each of their clients "
           "saw its answer cut, as when an HTTP/1.1 upstream connection drops).",
           static_cast<double>(h2.lost_with_streams.load(std::memory_order_relaxed)));
}

}  // namespace kf
