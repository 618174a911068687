// CacheHandler: answers LIST, GET and WATCH of a cached resource from its Cacher, with the
// apiserver's semantics and wire format, after the apiserver has confirmed (AccessReview) that
// the client may make the request. Anything it cannot answer exactly (paginated or Exact-RV
// LISTs, protobuf-only or Table/metadata requests, pretty output, invalid parameters, selector
// errors, denied or unknown access) it declines, and the request passes through; the apiserver
// then answers it itself.
//
// Runs inside an HttpSession's coroutine on its worker thread.
#ifndef KUBE_FANOUT_SERVE_CACHE_HANDLER_H_
#define KUBE_FANOUT_SERVE_CACHE_HANDLER_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/fields.hpp>
#include <optional>

#include "cache/cacher.h"
#include "upstream/access_review.h"
#include "common/any_stream.h"
#include "sync/reflector.h"
#include "serve/wakeups.h"
#include "edge/request_info.h"
#include "upstream/upstream_pool.h"

namespace kf {

struct CacheServeStats {
  std::atomic<uint64_t> lists{0}, gets{0}, watches{0}, declined{0};
  std::atomic<uint64_t> bytes_written{0}, events_written{0};
  std::atomic<int64_t> open_watches{0};
};

struct CacheRequest {
  AnyStream& client;
  beast::flat_buffer& client_buffer;
  const boost::beast::http::fields& headers;
  const RequestInfo& info;
  Cacher& cacher;
  Reflector& reflector;            // Current-RV probes and progress for consistent reads.
  UpstreamPool& own_pool;          // kube-fanout's identity.
  UpstreamPool& passthrough_pool;  // no identity: access reviews with the client's header.
  AccessReview& access;
  Wakeups& wakeups;  // The session thread's (per-thread dispatch).
  CacheServeStats& stats;
  const bool& stopping;
  std::function<std::string()> own_credentials;
  size_t watcher_max_queue_bytes;
  int64_t bookmark_interval_ms;
};

struct CacheOutcome {
  int status = 0;
  uint64_t bytes = 0;
  bool keep_alive = false;
  std::string error;
};

// When a watch with ?timeoutSeconds=`timeout_seconds` (0 if absent) started at `now` ends, as
// the apiserver's watch handler decides it, without overflowing the clock.
std::chrono::steady_clock::time_point WatchDeadline(std::chrono::steady_clock::time_point now,
                                                   int64_t timeout_seconds);

// nullopt: declined, pass the request through. `stop_hook` is set while a watch runs (see
// RelayRequest::stop_hook).
asio::awaitable<std::optional<CacheOutcome>> ServeFromCache(CacheRequest& request,
                                                            std::function<void()>& stop_hook);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CACHE_HANDLER_H_
