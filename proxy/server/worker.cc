#include "proxy/server/worker.h"

#include "proxy/filters/identity_filter.h"
#include "proxy/passthrough/relay.h"
#include "proxy/server/local_handler.h"

namespace kf {

Worker::Worker(const WorkerUpstream& up)
    : guard_(asio::make_work_guard(ioc_)),
      request_header_(*up.request_header),
      pool_(ioc_, *up.upstream, *up.passthrough_tls, up.dial_timeout, up.pool_stats,
            up.passthrough_http2),
      own_pool_(ioc_, *up.upstream, *up.own_tls, up.dial_timeout, up.pool_stats),
      authn_(up.authentication, *up.authentication_stats, review_slots_, up.own_authorization,
             *up.request_header),
      access_(up.authorization, *up.authorization_stats, review_slots_, up.own_authorization,
              *up.access_answers) {
  const auto pool = [&](const UpstreamConfig& config, asio::ssl::context& tls, bool http2) {
    return std::make_unique<UpstreamPool>(ioc_, config, tls, up.dial_timeout, up.pool_stats, http2);
  };
  // Passthrough pools (each presents one credential, or none) may speak HTTP/2; kube-fanout's
  // own use HTTP/1.1.
  const bool h2 = up.passthrough_http2;
  if (up.events != nullptr) {
    events_pool_ = pool(*up.events, *up.passthrough_tls, h2);
    events_own_pool_ = pool(*up.events, *up.own_tls, false);
  }
  if (up.front_proxy_tls != nullptr) {
    front_pool_ = pool(*up.upstream, *up.front_proxy_tls, h2);
    if (up.events != nullptr) events_front_pool_ = pool(*up.events, *up.front_proxy_tls, h2);
  }
}

Worker::~Worker() {
  StopNow();
  Join();
  ioc_.DestroyPendingHandlers();
}

void Worker::BuildPipeline(const SharedStages& shared, const Logger& log, RouteStats& stats) {
  PipelineStages stages;
  stages.local = shared.local;
  if (shared.local != nullptr) stages.routes.is_local = &LocalHandler::Serves;
  if (shared.admission != nullptr || shared.event_spam != nullptr) {
    own_filters_.push_back(std::make_unique<IdentityFilter>(
        authn_, own_pool_, shared.admission != nullptr, shared.event_spam != nullptr));
    stages.front.push_back(own_filters_.back().get());
  }
  for (Filter* f : {shared.admission, shared.expect_continue}) {
    if (f != nullptr) stages.front.push_back(f);
  }
  for (Filter* f : {shared.passthrough_charge, shared.coalescing, shared.in_flight,
                    shared.long_running, shared.event_spam}) {
    if (f != nullptr) stages.passthrough.push_back(f);
  }
  if (shared.cache != nullptr) {
    const CachedResources* cache = shared.cache;
    stages.routes.is_cached = [cache](const RequestInfo& info) {
      return cache->Find(info) != nullptr;
    };
    own_handlers_.push_back(std::make_unique<CacheHandler>(
        *cache, own_pool_, authn_, access_, wakeups_, *shared.cache_stats, shared.watch, &stats));
    stages.cache = own_handlers_.back().get();
  }
  RelayPools pools;
  pools.pool = &pool_;
  pools.events_pool = &events_pool();
  pools.front_pool = front_pool_.get();
  pools.events_front_pool = events_front_pool_ ? events_front_pool_.get() : front_pool_.get();
  own_handlers_.push_back(std::make_unique<Relay>(pools, request_header_));
  stages.relay = own_handlers_.back().get();
  // The TLS listener's: the same stages, /metrics authorized as the apiserver authorizes it.
  // The plain listener is a loopback one (a sidecar's, proxy/server/options.h) and keeps it open.
  PipelineStages tls_stages = stages;
  if (shared.local != nullptr) {
    own_handlers_.push_back(
        std::make_unique<ApiMetricsHandler>(*shared.local, authn_, access_, own_pool_));
    tls_stages.local = own_handlers_.back().get();
  }
  pipeline_ = std::make_unique<Pipeline>(std::move(stages), log, stats);
  tls_pipeline_ = std::make_unique<Pipeline>(std::move(tls_stages), log, stats);
}

void Worker::Start() {
  thread_ = std::thread([this] { ioc_.run(); });
}

void Worker::Release() {
  // Shared HTTP/2 upstream connections keep a read pending: closed (no request is left on
  // them), so the thread ends once the rest of its work is done.
  asio::post(ioc_, [this] {
    for (UpstreamPool* p :
         {&pool_, events_pool_.get(), front_pool_.get(), events_front_pool_.get()})
      if (p != nullptr) p->CloseHttp2();
  });
  guard_.reset();
}

void Worker::StopNow() {
  guard_.reset();
  ioc_.stop();
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace kf
