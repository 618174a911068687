// HttpSession: one client connection (plain or TLS). Reads requests one after another
// (HTTP/1.1 keep-alive), parses each once into a RequestInfo, answers kube-fanout's own paths
// (/healthz, /livez, /readyz) itself and passes everything else through to the upstream, and
// writes one structured log line per request.
//
// Lives on one Worker's thread for life: created there, registered with the worker, kept alive
// by its Run() coroutine (shared_from_this). Stop() is called on that thread.
#ifndef KUBE_FANOUT_EDGE_HTTP_SESSION_H_
#define KUBE_FANOUT_EDGE_HTTP_SESSION_H_

#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/log.h"
#include "common/any_stream.h"
#include "serve/cache_handler.h"
#include "sync/cached_resources.h"
#include "passthrough/coalescer.h"
#include "server/health.h"
#include "upstream/identity.h"
#include "server/metrics.h"
#include "edge/request_parser.h"
#include "edge/status_response.h"
#include "ratelimit/admission.h"
#include "ratelimit/event_filter.h"

namespace kf {

class Worker;

// What every session shares; outlives all sessions.
struct SessionEnv {
  const Logger& log;
  const HealthChecks& health;
  std::atomic<int64_t>& active_sessions;
  const CachedResources* cache;  // Null: everything passes through.
  CacheServeStats& cache_stats;
  std::function<std::string()> own_credentials;
  size_t watcher_max_queue_bytes;
  int64_t bookmark_interval_ms;
  RouteStats& routes;
  std::function<std::string()> metrics;  // The /metrics body.
  ratelimit::Admission* admission;       // Null: everything admitted.
  std::atomic<int64_t>& passthrough_in_flight;
  int max_passthrough_in_flight;  // 0: unlimited.
  std::atomic<uint64_t>& passthrough_rejected;
  ratelimit::EventSpamFilter* event_filter;  // Null: off.
  Coalescer* coalescer;                      // Null: off.
  bool event_spam_filter_enabled() const { return event_filter != nullptr; }
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::unique_ptr<AnyStream> client, std::string remote, Worker& worker,
              const SessionEnv& env);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void Start();
  // Graceful stop: a connection waiting for its next request closes now, a passthrough watch
  // ends cleanly now (its chunked stream is terminated), any other request finishes and its
  // response says Connection: close.
  void Stop();

 private:
  struct RequestLog;
  enum class State { kStarting, kIdle, kBusy, kWatching };

  asio::awaitable<void> Run();
  asio::awaitable<bool> ServeOne();  // false: close the connection.
  // Coalescing of identical passthrough reads (coalescer.h).
  asio::awaitable<CapturedPtr> WaitFlight(std::shared_ptr<Coalescer::Flight> flight);
  asio::awaitable<bool> WriteCaptured(const CapturedResponse& shared, bool keep_alive,
                                      RequestLog& log);
  // The rest of the request body, whole; nullopt past `limit` bytes or on a read error.
  asio::awaitable<std::optional<std::string>> ReadWholeBody(
      RequestParser& parser, size_t limit);
  // Admission's verdict for this request (always admitted when admission is off).
  asio::awaitable<ratelimit::Decision> Admit(const http::fields& headers, const RequestInfo& info,
                                             std::string_view method,
                                             const std::optional<UserInfo>& user);
  asio::awaitable<bool> WriteSimple(int code, std::string_view content_type, std::string body,
                                    bool keep_alive, RequestLog& log,
                                    std::optional<int> retry_after = std::nullopt);
  // The answer of Go's http.Server to a request it cannot parse (400) or whose header is too
  // large (431): plain text, then the connection closes.
  asio::awaitable<void> WriteGoServerError(int code, RequestLog& log);
  void LogRequest(const RequestLog& log) const;
  asio::awaitable<bool> WriteKubeStatus(const KubeStatus& status, bool keep_alive, RequestLog& log);

  std::unique_ptr<AnyStream> client_;
  std::string remote_;
  Worker& worker_;
  const SessionEnv& env_;
  beast::flat_buffer buffer_;
  State state_ = State::kStarting;
  bool stopping_ = false;
  std::function<void()> stop_hook_;  // Set by a relayed watch; see RelayRequest::stop_hook.
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP_SESSION_H_
