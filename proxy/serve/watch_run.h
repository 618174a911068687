// WatchRun: a cached watch's running state, held by the open watch (watch_stream.cc, OpenWatch),
// and its writes: the Wakeup the cache's notifications reach on the session's thread, the batch
// taken from the watcher and written (from the wake-up itself when the connection takes it at
// once, else by the watch's loop: WriteBatch), and the bookmarks due. All of it lives and runs on
// the session's thread.
#ifndef KUBE_FANOUT_SERVE_WATCH_RUN_H_
#define KUBE_FANOUT_SERVE_WATCH_RUN_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cache/cacher.h"
#include "proxy/edge/exchange.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/serve/wakeups.h"
#include "proxy/serve/watch_gzip.h"
#include "proxy/sync/reflector.h"

namespace kf {

struct WatchRun;

// Wakes a waiting watch loop from the session's thread, without lost wakeups. Named to the
// cache by a slot of the thread's Wakeups, held as long as it lives (on that thread).
struct Wakeup final : Wakeable, Response::WriteDone {
  Wakeup(const asio::any_io_executor& e, Response& r, Wakeups& w)
      : timer(e), response(r), wakeups(w), ref(w.Register(this)) {}
  ~Wakeup() override { wakeups.Unregister(ref); }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;
  asio::steady_timer timer;
  Response& response;
  Wakeups& wakeups;
  const NotifySink::Ref ref;
  std::shared_ptr<CacheWatcher> watcher;  // Set once registered.
  bool woken = false;
  // The loop, while it waits on `timer` with nothing written or held (OpenWatch::Run).
  WatchRun* parked = nullptr;
  // The client's end (Response::WatchClient): the callback ran; it said the client left
  // before the watch stopped watching.
  bool client_told = false;
  bool client_gone = false;
  bool client_unwatched = false;  // StopWatchingClient was called.

  // Events for a parked watch go out from here when the connection takes them at once (the
  // usual case: no coroutine resumed, no timer re-armed per delivery). Otherwise the loop runs.
  // A watcher cut for slowness also aborts a write stuck on its client, so the connection is
  // dropped at once.
  void Wake() override;
  void RunLoop() {
    woken = true;
    timer.cancel();
    if (watcher && watcher->closed()) response.Cancel();
  }
  // A write DeliverNow queued is done (before its burst ended: the loop is still parked).
  void Written(Response::TryWrite result) override;

  // What DeliverNow reads first: the loop's state, the response, the watcher's queue.
  void Prefetch() const override {
    if (parked == nullptr) return;
    const char* run = reinterpret_cast<const char*>(parked);
    __builtin_prefetch(run);
    __builtin_prefetch(run + 64);
    __builtin_prefetch(run + 128);
    __builtin_prefetch(run + 192);
    response.Prefetch();
    if (watcher) watcher->Prefetch();
  }
  void PrefetchDeep() const override;
};

struct WatchParams {
  Cacher::Start start = Cacher::Start::kInitialState;
  uint64_t rv = 0;
  bool bookmarks = false;
  bool initial_events_end = false;
  bool progress_request = false;  // kProgressRequestHeader: a bookmark once proven current.
  bool gzip = false;              // The answer is compressed (watch_gzip.h).
  std::chrono::steady_clock::time_point deadline;
};

// A progress request's proof: the cache brought up to its upstream's current RV (as for a
// consistent read), run beside the watch.
struct ProgressProof {
  bool done = false;
  bool proven = false;
};

// As the apiserver's cacher schedules bookmarks (cache_watcher.go, nextBookmarkTime): every
// interval, and 2 s before the watch's deadline so the client can resume from a fresh RV.
struct BookmarkClock {
  using Clock = std::chrono::steady_clock;
  std::chrono::milliseconds interval;
  Clock::time_point deadline;
  Clock::time_point next;
  Clock::time_point After(Clock::time_point now) const {
    auto at = now + interval;
    const auto before_deadline = deadline - std::chrono::seconds(2);
    if (before_deadline > now && before_deadline < at) at = before_deadline;
    return at;
  }
};

struct WatchRun {
  // What the watch writes to and is stopped by, both the transport's (they outlive the Exchange
  // of a detached watch: Detached).
  Response& response;
  const StopSignal& stop;
  std::string error;  // Why it ended early, for the log (Detached::error).
  Cacher& cacher;
  std::shared_ptr<CacheWatcher> watcher;
  std::shared_ptr<Wakeup> wake;
  WatchParams params;
  BookmarkClock bookmarks;
  CacheServeStats& stats;
  uint64_t last_rv = 0;
  bool first = true;
  std::shared_ptr<ProgressProof> proof;  // Set for a progress request until its bookmark.
  CacheWatcher::Batch batch;             // Reused: its vector's capacity goes back to the queue.
  // The batch taken and framed (TakeBatch) and not yet written, or held part-written by
  // Response::TryWriteBody (then `held`): the loop writes it before taking more.
  bool taken = false;
  bool held = false;
  std::shared_ptr<const std::string> bookmark;
  std::vector<asio::const_buffer> bufs;  // Its room kept for a few pieces only (BatchWritten).
  // What `bufs` point to when params.gzip (made on its first batch: most watches are plain).
  std::unique_ptr<WatchGzipHold> gzipped;
  size_t bytes = 0;
  bool failed = false;                   // A write without the loop failed (`error` says why).
  const Reflector* reflector = nullptr;  // The cache's: what its upstream sends (DueBookmark).
};

// Writes what the watcher has queued (and a bookmark when one is due) as one body piece, or
// the rest of what DeliverNow took. False: the watch is over (closed by the cache, or the
// write failed).
asio::awaitable<bool> WriteBatch(WatchRun& w, std::chrono::steady_clock::time_point now);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WATCH_RUN_H_
