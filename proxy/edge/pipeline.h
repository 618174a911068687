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

#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "proxy/edge/filter.h"
#include "proxy/edge/router.h"

namespace kf {

struct PipelineStages {
  RoutingTable routes;
  Handler* local = nullptr;
  Handler* cache = nullptr;          // Null: nothing is served from a cache.
  Handler* relay = nullptr;          // Passthrough and tunnels.
  std::vector<Filter*> front;        // Every route but local.
  std::vector<Filter*> passthrough;  // Before the relay.
};

// What the access log says of a request, as views of the request or of a RequestRecord.
struct RequestLogFields {
  std::string_view method;
  std::string_view uri;
  std::string_view verb;
  std::string_view resource;
  std::string_view user_agent;
  std::string_view accept;
  std::string_view upstream;
  std::string_view error;
  Answer answer = Answer::kPassthrough;
  bool h2 = false;
  absl::Time start;
};

// The same fields, owning their bytes (one block): a watch that outlives its request's frames
// (HttpSession) keeps this, not the request's head. Other requests are logged from views.
class RequestRecord {
 public:
  RequestRecord() = default;
  explicit RequestRecord(const RequestLogFields& fields);
  const RequestLogFields& fields() const { return fields_; }

 private:
  std::unique_ptr<char[]> bytes_;  // On the heap: moving the record keeps the views valid.
  RequestLogFields fields_;
};

class Pipeline {
 public:
  Pipeline(PipelineStages stages, const Logger& log, RouteStats& stats)
      : stages_(std::move(stages)), log_(log), stats_(stats) {}

  // Answers the request; a watch a handler left running (Exchange::detached) runs to its end
  // here too.
  asio::awaitable<void> Serve(Exchange& x);
  // As Serve, but leaves x.detached for the caller to run (once the request is gone, if it
  // likes: Detached).
  asio::awaitable<void> Handle(Exchange& x);

  // One access-log line for a request and its answer; counts it.
  void Log(const Exchange& x, std::string_view remote) const;
  static RequestRecord Record(const Exchange& x);
  // The same line from its fields (a record's), with the answer's status and body size.
  void Log(const RequestLogFields& f, int status, uint64_t body_bytes,
           std::string_view remote) const;
  // A detached watch has run (HttpSession, Http2Session): ends it, then logs its request from
  // `record` with the watch's error, if any, and the answer's status and size.
  void LogDetached(std::unique_ptr<Detached> watch, const RequestRecord& record,
                   const Response& response, std::string_view remote) const;
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
