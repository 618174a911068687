// CacheHandler: answers LIST, GET and WATCH of a cached resource from its Cacher with the
// apiserver's semantics and wire format, after the apiserver has confirmed (AccessReview, with
// the client's own credentials) that the client may make the request. What it cannot answer
// exactly it declines (Serve returns false, nothing written) and the request passes through.
//
//   Cacheable? ─► FilterFor ─► AccessReview ─► watch: ServeWatch (watch_stream.h)
//                                          ├─► get:   RequiredVersion ─► WriteObject
//                                          └─► list:  PlanList ─► RequiredVersion ─► WriteList
//
// One per worker thread (the pool, the access-review cache and the Wakeups are that thread's).
#ifndef KUBE_FANOUT_SERVE_CACHE_HANDLER_H_
#define KUBE_FANOUT_SERVE_CACHE_HANDLER_H_

#include "edge/filter.h"
#include "serve/serve_stats.h"
#include "serve/wakeups.h"
#include "serve/watch_stream.h"
#include "sync/cached_resources.h"
#include "upstream/access_review.h"
#include "upstream/upstream_pool.h"

namespace kf {

class CacheHandler : public Handler {
 public:
  // `pool`: connections without an identity, for access reviews with the client's header.
  CacheHandler(const CachedResources& cache, UpstreamPool& pool, AccessReview& access,
               Wakeups& wakeups, CacheServeStats& stats, WatchOptions options)
      : cache_(cache),
        pool_(pool),
        access_(access),
        wakeups_(wakeups),
        stats_(stats),
        options_(options) {}

  asio::awaitable<bool> Serve(Exchange& x) override;

 private:
  asio::awaitable<bool> ServeRead(Exchange& x, const CachedResources::Entry& entry,
                                  const WatchFilter& filter);

  const CachedResources& cache_;
  UpstreamPool& pool_;
  AccessReview& access_;
  Wakeups& wakeups_;
  CacheServeStats& stats_;
  WatchOptions options_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CACHE_HANDLER_H_
