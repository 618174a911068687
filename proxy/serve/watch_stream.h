// WatchStream: a cached WATCH, as the apiserver's watch cache serves one: HTTP 200 at once,
// then each batch of events as one body piece of shared, pre-encoded frames (never copied per
// watcher), bookmarks when asked for (periodically and 2 s before the deadline; the WatchList
// initial-events-end bookmark), until the deadline, a graceful stop, the client's end, or the
// watcher being cut for slowness (the connection is then dropped: nothing polite can reach a
// client that does not read). A start RV older than the window: one ERROR event with the 410.
//
// Set up (and its head written) in the request's coroutine, then started by the transport once
// the request's frames have ended (Exchange::detached: HttpSession::ServeHttp1 for HTTP/1.x,
// Http2Session::Serve for HTTP/2), with no coroutine while idle; the Cacher wakes it through the
// thread's Wakeups, and its events mostly go out from the wake-up (Response::TryWriteBody).
#ifndef KUBE_FANOUT_SERVE_WATCH_STREAM_H_
#define KUBE_FANOUT_SERVE_WATCH_STREAM_H_

#include <chrono>
#include <optional>

#include "cache/cacher.h"
#include "proxy/edge/exchange.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/serve/wakeups.h"
#include "proxy/serve/watch_gzip.h"
#include "proxy/sync/reflector.h"
#include "ratelimit/watch_slots.h"

namespace kf {

class ListPool;
class GzipCache;

// When a watch with ?timeoutSeconds=`timeout_seconds` (0 if absent) started at `now` ends, as
// the apiserver's watch handler decides it, without overflowing the clock.
std::chrono::steady_clock::time_point WatchDeadline(std::chrono::steady_clock::time_point now,
                                                    int64_t timeout_seconds);

struct WatchOptions {
  size_t max_queue_bytes = 0;          // A watcher's queue past this is cut.
  QueueBudget* total_queue = nullptr;  // All watchers' queues together (null: no bound).
  WatchSlots* slots = nullptr;         // Watches open at once (null: no bound).
  std::chrono::milliseconds bookmark_interval{60000};
  // The cache handler's, beside the watches': one consistent LIST/GET per resource per this
  // interval goes to the apiserver at once (Reflector::TakeConsistentPassthrough); 0: none.
  std::chrono::milliseconds consistent_passthrough_interval{0};
  // And consistent GETs of one object per resource, up to this many a second besides
  // (Reflector::TakeConsistentGetPassthrough); 0: none.
  uint32_t consistent_get_passthrough_qps = 0;
  // LISTs (list_response.h), for the cache handler: the pool large ones are built and
  // compressed in, and their shared compressed bytes (null: on the I/O threads, anew).
  ListPool* list_pool = nullptr;
  GzipCache* list_gzip = nullptr;
  WatchListGzip watchlist_gzip = WatchListGzip::kAuto;  // --watchlist-gzip (watch_gzip.h).
};

// False: declined before anything was written (the RV cannot be promised in time).
// `witness`: the resource's cache in the other encoding, if running (Cacher::NothingFor): a
// start RV before `cacher`'s window that it shows nothing for starts at the window's start
// instead of a 410. Once the watch is registered, it is set up and left in `x.detached` (with
// `*slot`, if given, held until it ends): the watch runs when the request's frames have ended.
asio::awaitable<bool> ServeWatch(Exchange& x, Cacher& cacher, Reflector& reflector,
                                 const WatchFilter& filter, Wakeups& wakeups,
                                 CacheServeStats& stats, const WatchOptions& options,
                                 const Cacher* witness = nullptr, WatchSlots::Slot* slot = nullptr);

// Sends what this thread's direct watch writes left batched per connection (SendBatchedWrites:
// HTTP/2), and adds what they counted to the shared CacheServeStats (they are added up per
// thread, not per delivery): each Wakeups calls it at the end of a drain
// (Wakeups::set_after_drain).
void FlushWatchWriteTally();

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WATCH_STREAM_H_
