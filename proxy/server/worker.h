// Worker: one I/O thread with its own io_context, and what lives on that thread only: its
// sessions, its pools of upstream connections, its identity cache and access reviews (their
// answers shared by all workers: access_answers.h), and its pipeline (the per-thread handlers
// and filters, and the shared ones the server gives it). Connections are handed to a worker when
// accepted and stay on it for life, so per-connection state needs no locks or strands.
#ifndef KUBE_FANOUT_SERVER_WORKER_H_
#define KUBE_FANOUT_SERVER_WORKER_H_

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "proxy/edge/pipeline.h"
#include "proxy/edge/session_set.h"
#include "proxy/serve/cache_handler.h"
#include "proxy/serve/wakeups.h"
#include "proxy/upstream/access_review.h"
#include "proxy/upstream/identity.h"
#include "proxy/upstream/request_header.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

// What every worker's pipeline shares (owned by the server; null entries are off).
class LocalHandler;

// How a worker reaches the upstream and authenticates and authorizes its clients.
struct WorkerUpstream {
  const UpstreamConfig* upstream = nullptr;
  const UpstreamConfig* events = nullptr;  // A separate upstream for Events, or null.
  asio::ssl::context* passthrough_tls = nullptr;
  asio::ssl::context* own_tls = nullptr;
  asio::ssl::context* front_proxy_tls = nullptr;  // Null: no front proxy configured.
  std::chrono::milliseconds dial_timeout{10000};
  bool passthrough_http2 = false;  // The passthrough pools speak HTTP/2 where they can.
  std::function<std::string()> own_authorization;  // kube-fanout's own Authorization header.
  CacheSettings authentication, authorization;
  ReviewStats* authentication_stats = nullptr;
  ReviewStats* authorization_stats = nullptr;
  AccessAnswers* access_answers = nullptr;  // Every worker's AccessReview shares them.
  UpstreamPoolStats* pool_stats = nullptr;
  const RequestHeaderNames* request_header = nullptr;
};

struct SharedStages {
  LocalHandler* local = nullptr;
  Filter* admission = nullptr;
  Filter* passthrough_charge = nullptr;  // With admission: a declined cached read's price.
  Filter* expect_continue = nullptr;
  Filter* coalescing = nullptr;
  Filter* in_flight = nullptr;
  Filter* long_running = nullptr;
  Filter* event_spam = nullptr;
  const CachedResources* cache = nullptr;
  CacheServeStats* cache_stats = nullptr;
  WatchOptions watch;
};

class Worker {
 public:
  // A TLS connection whose session starts more than this after it was accepted is closed
  // unhandshaken if its client has left meanwhile (HttpSession::SetHandshakeGate).
  static constexpr std::chrono::milliseconds kHandshakeQueueWait{1000};
  // Accepted TLS connections whose session has not started, per thread, past which the accept
  // loop stops accepting for a moment: later clients wait in the kernel's listen queue (no
  // descriptor, no memory here) instead of in this process.
  static constexpr int64_t kMaxHandshakesPending = 512;

  explicit Worker(const WorkerUpstream& up);
  ~Worker();

  // Builds this thread's pipeline (before Start) for a worker that serves sessions.
  void BuildPipeline(const SharedStages& shared, const Logger& log, RouteStats& stats);

  void Start();    // Runs the io_context on a new thread.
  void Release();  // Lets run() return once the work is done.
  void StopNow();  // Abandons outstanding work.
  void Join();

  asio::io_context& ioc() { return ioc_; }
  // The plain listener's pipeline, and the TLS listener's (/metrics authorized there).
  Pipeline& pipeline() { return *pipeline_; }
  Pipeline& tls_pipeline() { return *tls_pipeline_; }
  SessionSet& sessions() { return sessions_; }
  std::atomic<int64_t>& handshakes_pending() { return handshakes_pending_; }  // Any thread.
  UpstreamPool& own_pool() { return own_pool_; }  // kube-fanout's identity: reflectors.
  UpstreamPool& events_own_pool() { return events_own_pool_ ? *events_own_pool_ : own_pool_; }

 private:
  UpstreamPool& events_pool() { return events_pool_ ? *events_pool_ : pool_; }

  // An io_context whose pending handlers (sessions' coroutine frames, with the permits, pool
  // connections and session-set entries they hold) can be destroyed while the members declared
  // after it, which they refer to, still exist: ~Worker does that first. Left to the
  // io_context's own destructor, they died last, after those members, and a stop with
  // thousands of connections open ended in "double free or corruption".
  struct IoContext : asio::io_context {
    using asio::io_context::io_context;
    void DestroyPendingHandlers() { shutdown(); }
  };
  IoContext ioc_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  const RequestHeaderNames& request_header_;
  UpstreamPool pool_;      // No identity: passthrough with the client's own credentials.
  UpstreamPool own_pool_;  // kube-fanout's identity: reflectors, reviews.
  std::unique_ptr<UpstreamPool> events_pool_, events_own_pool_;
  std::unique_ptr<UpstreamPool> front_pool_, events_front_pool_;  // The front proxy's.
  // TokenReviews and SubjectAccessReviews on their way to the apiserver at once, and those
  // waiting their turn (a fleet of new node identities arriving together: one review each).
  ReviewSlots review_slots_;
  std::atomic<int64_t> handshakes_pending_{0};
  Authenticator authn_;
  AccessReview access_;
  Wakeups wakeups_{ioc_.get_executor()};  // Watchers on this thread, woken by the cache.
  std::vector<std::unique_ptr<Filter>> own_filters_;
  std::vector<std::unique_ptr<Handler>> own_handlers_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<Pipeline> tls_pipeline_;
  SessionSet sessions_;
  std::thread thread_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_WORKER_H_
