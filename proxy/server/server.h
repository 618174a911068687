// Server: kube-fanout's process-level wiring. Owns the listeners (plain and TLS), the worker
// threads, the TLS contexts and the health checks; accepts connections on the main thread and
// hands each to a worker round-robin; on SIGTERM/SIGINT drains gracefully (readyz fails, no
// new connections, watches end cleanly, other requests get the grace period).
//
// Run() blocks on the calling thread until shutdown completes.
#ifndef KUBE_FANOUT_SERVER_SERVER_H_
#define KUBE_FANOUT_SERVER_SERVER_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "cache/queue_budget.h"
#include "common/log.h"
#include "proxy/edge/http2_session.h"
#include "proxy/edge/tls_config.h"
#include "proxy/filters/admission_filter.h"
#include "proxy/filters/continue_filter.h"
#include "proxy/filters/event_spam_gate.h"
#include "proxy/filters/in_flight_cap.h"
#include "proxy/filters/long_running_cap.h"
#include "proxy/filters/passthrough_charge.h"
#include "proxy/passthrough/coalescing_filter.h"
#include "proxy/serve/gzip_cache.h"
#include "proxy/serve/list_pool.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/server/health.h"
#include "proxy/server/heap_trim.h"
#include "proxy/server/local_handler.h"
#include "proxy/server/metrics.h"
#include "proxy/server/options.h"
#include "proxy/server/storm_episode.h"
#include "proxy/server/worker.h"
#include "proxy/sync/cached_resources.h"
#include "proxy/upstream/own_credentials.h"
#include "proxy/upstream/request_header.h"
#include "proxy/upstream/review_stats.h"
#include "ratelimit/admission.h"
#include "ratelimit/event_filter.h"
#include "ratelimit/watch_slots.h"

namespace kf {

class Server {
 public:
  Server(ProxyOptions options, UpstreamConfig upstream, const Logger& log);
  ~Server();

  // Binds the listeners and starts the workers. Fails with a clear message (address in use,
  // unreadable certificate, bad CA) before anything is served.
  absl::Status Start();
  // Serves until a termination signal, then drains. Returns the process exit code.
  int Run();

  // The bound ports (after Start), useful when listening on port 0.
  uint16_t listen_port() const { return listen_port_; }
  uint16_t secure_listen_port() const { return secure_listen_port_; }
  uint16_t metrics_listen_port() const { return metrics_listen_port_; }
  const CachedResources* cache() const { return cache_.get(); }
  const CacheServeStats& cache_stats() const { return cache_stats_; }
  int64_t active_sessions() const { return active_sessions_.load(); }

 private:
  // `only`: the pipeline for every connection (the metrics listener's, on the first worker);
  // null: each worker's own, connections spread over the workers.
  asio::awaitable<void> AcceptLoop(asio::ip::tcp::acceptor& acceptor, bool tls,
                                   Pipeline* only = nullptr);
  // A connection as AcceptLoop takes it, its socket already on its worker's io_context.
  using AcceptedSocket =
      asio::ip::tcp::socket::rebind_executor<asio::io_context::executor_type>::other;
  // True: refused (closed, uncounted) for want of descriptors (fd_refuse_at_).
  bool RefusedNearFdLimit(AcceptedSocket& socket, Worker& worker);
  // The HTTP/2 limits the flags set, one copy for every connection.
  static SharedHttp2Limits MakeHttp2Limits(const ProxyOptions& options);
  // On the worker's thread: the connection's HttpSession, started (unless shutting down).
  void StartSession(Worker& worker, Pipeline& pipeline, bool tls,
                    std::chrono::steady_clock::time_point accepted, std::string remote,
                    AcceptedSocket socket);
  absl::Status Listen(const std::string& address, asio::ip::tcp::acceptor& acceptor,
                      uint16_t* port);
  // The graceful stop's phases (server_shutdown.cc): --shutdown-delay-duration (/readyz fails
  // at once, all else is served for that long), then BeginShutdown: the listeners close, the
  // connections end spread over --shutdown-watch-termination-grace-period (if set), and Drain
  // gives the rest --shutdown-grace-period.
  asio::awaitable<void> ShutdownAfterDelay(int signal);
  void BeginShutdown(int signal);
  void StopCacheAndSessions();
  asio::awaitable<void> SpreadWatchTermination(std::chrono::milliseconds period);
  asio::awaitable<void> Drain();
  // Expires queued requests; re-reads --admission-config when it changes.
  asio::awaitable<void> AdmissionLoop();
  // Every second, the overload refusals' totals into StormEpisode; logs its lines
  // (server_storm.cc).
  asio::awaitable<void> StormLogLoop();
  StormCounts StormTotals() const;
  void LogStormLine(const StormEpisode::Line& line) const;
  // Re-reads the serving certificate and key every second; swaps them in when they change.
  asio::awaitable<void> ServingCertificateLoop();
  // Looks at the heap every --heap-trim-interval and trims it after a storm (heap_trim.h).
  asio::awaitable<void> HeapTrimLoop();
  // Warns loudly about an upstream that is plain HTTP or whose certificate is not verified.
  void WarnInsecureUpstream() const;
  // Warns when kube-fanout's own identity may not make TokenReviews or SubjectAccessReviews.
  asio::awaitable<void> CheckDelegation(UpstreamPool& own_pool);
  std::atomic<bool> delegation_checked_{false};
  Worker& NextWorker();
  // True while every worker has kMaxHandshakesPending TLS connections waiting for their
  // session: the accept loop then pauses (counted; logged at most every 10 s, with the count).
  bool TlsListenerFull();
  std::chrono::steady_clock::time_point last_pause_log_{};
  // The steps of Start(), in order.
  absl::Status MakeUpstreamTls();
  absl::Status MakeEventsUpstream();
  absl::Status MakeCache();
  void UseSnapshots();  // --cache-snapshot-dir, on the cache MakeCache built.
  absl::Status MakeAdmission();
  absl::Status MakeServerTls();
  absl::Status ListenAll();
  absl::Status StartWorkers();
  // What each worker is given to reach the upstream and review clients (server_setup.cc).
  WorkerUpstream WorkerUpstreamFor(unsigned threads);
  // --io-uring: whether io_uring can be set up here; if so, bursts batch their sends.
  void UseIoUring();
  void LogServing() const;
  // The pipeline's stages every worker shares, built once from the options.
  void BuildSharedStages();
  SharedStages Stages();
  // Each component's metric families, in /metrics order (server_metrics.cc).
  std::vector<MetricsRenderer> MetricsRenderers() const;

  ProxyOptions options_;
  UpstreamConfig upstream_;
  const Logger& log_;
  bool io_uring_ = false;  // Watch writes batched in io_uring (UseIoUring).
  HealthChecks health_;
  std::atomic<int64_t> active_sessions_{0};
  CacheServeStats cache_stats_;
  // Every watcher's queue counts here: declared before the cache and the workers, which hold
  // the watchers, so it outlives them.
  QueueBudget watch_queue_budget_{static_cast<size_t>(options_.watchers_max_total_queue_bytes)};
  WatchSlots watch_slots_{options_.max_watchers, options_.max_watchers_per_user};
  // Passthrough watches and tunnels (proxy/filters/long_running_cap.h).
  WatchSlots passthrough_slots_{options_.max_passthrough_watches,
                                options_.max_passthrough_watches_per_user};
  RouteStats route_stats_;
  std::unique_ptr<ratelimit::Admission> admission_;
  std::unique_ptr<ratelimit::EventSpamFilter> event_filter_;
  std::unique_ptr<Coalescer> coalescer_;
  std::optional<UpstreamConfig> events_upstream_;  // --events-upstream.
  std::string admission_config_text_;  // What the admission configuration was read from.
  // The pipeline's shared stages (each worker adds its own: identity, cache, relay).
  std::unique_ptr<LocalHandler> local_;
  NotFoundHandler not_found_;
  std::unique_ptr<Pipeline> metrics_pipeline_;  // --metrics-listen: local paths, else 404.
  std::unique_ptr<AdmissionFilter> admission_filter_;
  std::unique_ptr<PassthroughCharge> passthrough_charge_;
  ContinueFilter continue_filter_;
  std::unique_ptr<CoalescingFilter> coalescing_filter_;
  std::unique_ptr<InFlightCap> in_flight_cap_;
  std::unique_ptr<LongRunningCap> long_running_cap_;
  std::unique_ptr<EventSpamGate> event_spam_gate_;
  std::unique_ptr<OwnCredentials> own_credentials_;
  std::unique_ptr<CachedResources> cache_;
  asio::io_context main_ioc_{1};
  asio::ip::tcp::acceptor plain_acceptor_{main_ioc_};
  asio::ip::tcp::acceptor tls_acceptor_{main_ioc_};
  asio::ip::tcp::acceptor metrics_acceptor_{main_ioc_};
  std::unique_ptr<asio::ssl::context> server_tls_;
  SharedHttp2Limits h2_limits_;  // Every connection's (MakeHttp2Limits, at Start).
  std::unique_ptr<ServingCertificate> serving_cert_;  // --secure-listen's, reloaded on change.
  HeapTrimmer heap_trimmer_;                          // HeapTrimLoop's; rendered in /metrics.
  std::unique_ptr<asio::ssl::context> passthrough_tls_;
  std::unique_ptr<asio::ssl::context> own_tls_;
  std::unique_ptr<asio::ssl::context> front_proxy_tls_;  // --proxy-client-cert-file, or null.
  RequestHeaderNames request_header_;
  ReviewStats authentication_stats_, authorization_stats_;
  std::unique_ptr<AccessAnswers> access_answers_;  // Every worker's SubjectAccessReview answers.
  UpstreamPoolStats upstream_pool_stats_;          // Every worker's pools.
  // Session workers first; then, when caching, the cache's own thread (reflectors and their
  // upstream connections), so fan-out work never queues ahead of upstream reads.
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t session_workers_ = 0;
  uint16_t listen_port_ = 0;
  uint16_t secure_listen_port_ = 0;
  uint16_t metrics_listen_port_ = 0;
  std::atomic<bool> shutting_down_{false};  // Set on the main thread, read by the workers.
  // A new connection whose descriptor is at or past this is refused (file-descriptor headroom).
  int fd_refuse_at_ = std::numeric_limits<int>::max();
  // New connections refused: [0] for descriptor headroom, [1] failed accepts (EMFILE and such).
  std::atomic<uint64_t> connections_refused_[2] = {0, 0};
  // Times the TLS accept loop paused (20 ms) because every worker had kMaxHandshakesPending.
  std::atomic<uint64_t> accept_paused_{0};
  // Large LISTs (--list-threads, --list-gzip-cache-bytes). Declared after the workers so the
  // pool is joined first: its work resumes sessions on the workers' io_contexts (their threads
  // already stopped by then), and uses the cache and the shared gzip bytes.
  GzipCache list_gzip_{static_cast<size_t>(options_.list_gzip_cache_bytes)};
  std::unique_ptr<ListPool> list_pool_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_SERVER_H_
