// Worker: one I/O thread with its own io_context, and what lives on that thread only: its
// sessions, its pools of upstream connections, its caches of access reviews and identities,
// and its pipeline (the per-thread handlers and filters, and the shared ones the server gives
// it). Connections are handed to a worker when accepted and stay on it for life, so
// per-connection state needs no locks or strands.
#ifndef KUBE_FANOUT_SERVER_WORKER_H_
#define KUBE_FANOUT_SERVER_WORKER_H_

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "edge/pipeline.h"
#include "edge/session_set.h"
#include "serve/cache_handler.h"
#include "serve/wakeups.h"
#include "upstream/access_review.h"
#include "upstream/identity.h"
#include "upstream/upstream_pool.h"

namespace kf {

// What every worker's pipeline shares (owned by the server; null entries are off).
class LocalHandler;

struct SharedStages {
  LocalHandler* local = nullptr;
  Filter* admission = nullptr;
  Filter* expect_continue = nullptr;
  Filter* coalescing = nullptr;
  Filter* in_flight = nullptr;
  Filter* event_spam = nullptr;
  const CachedResources* cache = nullptr;
  CacheServeStats* cache_stats = nullptr;
  WatchOptions watch;
};

class Worker {
 public:
  // `events`: a separate upstream for Events (--events-upstream), or null.
  Worker(const UpstreamConfig& upstream, asio::ssl::context& passthrough_tls,
         asio::ssl::context& own_tls, std::chrono::milliseconds dial_timeout,
         const UpstreamConfig* events = nullptr);
  ~Worker();

  // Builds this thread's pipeline (before Start) for a worker that serves sessions.
  void BuildPipeline(const SharedStages& shared, const Logger& log, RouteStats& stats);

  void Start();    // Runs the io_context on a new thread.
  void Release();  // Lets run() return once the work is done.
  void StopNow();  // Abandons outstanding work.
  void Join();

  asio::io_context& ioc() { return ioc_; }
  Pipeline& pipeline() { return *pipeline_; }
  SessionSet& sessions() { return sessions_; }
  UpstreamPool& own_pool() { return own_pool_; }  // kube-fanout's identity: reflectors.
  UpstreamPool& events_own_pool() { return events_own_pool_ ? *events_own_pool_ : own_pool_; }

 private:
  UpstreamPool& events_pool() { return events_pool_ ? *events_pool_ : pool_; }

  asio::io_context ioc_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  UpstreamPool pool_;  // No identity: passthrough, access reviews, identities.
  UpstreamPool own_pool_;
  std::unique_ptr<UpstreamPool> events_pool_, events_own_pool_;
  AccessReview access_{std::chrono::seconds(10), std::chrono::seconds(5), 10000};
  Wakeups wakeups_{ioc_.get_executor()};  // Watchers on this thread, woken by the cache.
  WhoAmI who_am_i_{std::chrono::seconds(60), std::chrono::seconds(10), 10000};
  std::vector<std::unique_ptr<Filter>> own_filters_;
  std::vector<std::unique_ptr<Handler>> own_handlers_;
  std::unique_ptr<Pipeline> pipeline_;
  SessionSet sessions_;
  std::thread thread_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_WORKER_H_
