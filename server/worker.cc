#include "server/worker.h"

#include "filters/identity_filter.h"
#include "passthrough/relay.h"
#include "server/local_handler.h"

namespace kf {

Worker::Worker(const UpstreamConfig& upstream, asio::ssl::context& passthrough_tls,
               asio::ssl::context& own_tls, std::chrono::milliseconds dial_timeout,
               const UpstreamConfig* events)
    : guard_(asio::make_work_guard(ioc_)),
      pool_(ioc_, upstream, passthrough_tls, dial_timeout),
      own_pool_(ioc_, upstream, own_tls, dial_timeout) {
  if (events != nullptr) {
    events_pool_ = std::make_unique<UpstreamPool>(ioc_, *events, passthrough_tls, dial_timeout);
    events_own_pool_ = std::make_unique<UpstreamPool>(ioc_, *events, own_tls, dial_timeout);
  }
}

Worker::~Worker() {
  StopNow();
  Join();
}

void Worker::BuildPipeline(const SharedStages& shared, const Logger& log, RouteStats& stats) {
  PipelineStages stages;
  stages.local = shared.local;
  if (shared.local != nullptr) stages.routes.is_local = &LocalHandler::Serves;
  if (shared.admission != nullptr || shared.event_spam != nullptr) {
    own_filters_.push_back(std::make_unique<IdentityFilter>(
        who_am_i_, pool_, shared.admission != nullptr, shared.event_spam != nullptr));
    stages.front.push_back(own_filters_.back().get());
  }
  for (Filter* f : {shared.admission, shared.expect_continue}) {
    if (f != nullptr) stages.front.push_back(f);
  }
  for (Filter* f : {shared.coalescing, shared.in_flight, shared.event_spam}) {
    if (f != nullptr) stages.passthrough.push_back(f);
  }
  if (shared.cache != nullptr) {
    const CachedResources* cache = shared.cache;
    stages.routes.is_cached = [cache](const RequestInfo& info) {
      return cache->Find(info) != nullptr;
    };
    own_handlers_.push_back(std::make_unique<CacheHandler>(*cache, pool_, access_, wakeups_,
                                                           *shared.cache_stats, shared.watch));
    stages.cache = own_handlers_.back().get();
  }
  own_handlers_.push_back(std::make_unique<Relay>(pool_, events_pool()));
  stages.relay = own_handlers_.back().get();
  pipeline_ = std::make_unique<Pipeline>(std::move(stages), log, stats);
}

void Worker::Start() {
  thread_ = std::thread([this] { ioc_.run(); });
}

void Worker::Release() { guard_.reset(); }

void Worker::StopNow() {
  guard_.reset();
  ioc_.stop();
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace kf
