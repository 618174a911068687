// Pipeline: what happens to a request once its transport has read it, top to bottom:
//
//   RouteOf (router.h) ─► local ──────────────────────────────────────────► local handler
//                      └► cache / passthrough / tunnel
//                          front filters (identity, admission, 100-continue)
//                            ├─ cache route ─► cache handler ── declined? ─┐
//                            └───────────────────────────────────────────┴─► passthrough
//                               filters (coalescing, in-flight cap, Event spam) ─► relay
//
// then one access-log line and the answer counters. Handlers and filters are given by the
// server, so the edge knows their contracts (filter.h) and nothing of their insides.
//
// One per worker thread; Serve() runs on that thread.
#ifndef KUBE_FANOUT_EDGE_PIPELINE_H_
#define KUBE_FANOUT_EDGE_PIPELINE_H_

#include <string>
#include <vector>

#include "common/log.h"
#include "edge/filter.h"
#include "edge/router.h"

namespace kf {

struct PipelineStages {
  RoutingTable routes;
  Handler* local = nullptr;
  Handler* cache = nullptr;          // Null: nothing is served from a cache.
  Handler* relay = nullptr;          // Passthrough and tunnels.
  std::vector<Filter*> front;        // Every route but local.
  std::vector<Filter*> passthrough;  // Before the relay.
};

class Pipeline {
 public:
  Pipeline(PipelineStages stages, const Logger& log, RouteStats& stats)
      : stages_(std::move(stages)), log_(log), stats_(stats) {}

  asio::awaitable<void> Serve(Exchange& x);

  // One access-log line for a request and its answer; counts it.
  void Log(const Exchange& x, std::string_view remote) const;
  // For what never became a request (a head the transport could not parse: 431 or 400); counts
  // it as refused.
  void LogUnparsed(std::string_view remote, int status, std::string_view error) const;

  RouteStats& stats() const { return stats_; }

 private:
  asio::awaitable<void> ServeRoute(Exchange& x);
  asio::awaitable<void> Relay(Exchange& x);

  PipelineStages stages_;
  const Logger& log_;
  RouteStats& stats_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_PIPELINE_H_
