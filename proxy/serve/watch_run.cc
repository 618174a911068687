// WatchRun (watch_run.h): a batch taken from the watcher with the bookmark due, written from the
// wake-up or by the watch's loop, and let go once written; the direct writes' counts added up per
// thread.
#include "proxy/serve/watch_run.h"

#include <algorithm>
#include <vector>

#include "common/kept_room.h"
#include "proxy/serve/watch_stream.h"

namespace kf {
namespace {

using Clock = std::chrono::steady_clock;

// Delivers what a parked watch has queued without resuming its loop; false: the loop must run.
// A write queued in the thread's batch of sends (Response::TryWriteBodyOrQueue) is done too: its
// result comes to `done` (AfterDirectWrite).
bool DeliverNow(WatchRun& w, Response::WriteDone& done);
// What a direct write's result leaves to do; false: the loop must run.
bool AfterDirectWrite(WatchRun& w, Response::TryWrite result);

// What the writes made straight from wake-ups counted, added to the shared counters at the end
// of each drain (Wakeups::set_after_drain) rather than as two atomic additions per delivery on
// a line every worker thread writes.
struct DirectWriteTally {
  CacheServeStats* stats = nullptr;
  uint64_t bytes = 0;
  uint64_t writes = 0;
  // When the oldest event of each write arrived: timed once the round's sends have gone out.
  std::vector<Clock::time_point> received;
};
thread_local DirectWriteTally direct_tally;

void AddTallyToStats() {
  DirectWriteTally& t = direct_tally;
  if (t.stats == nullptr || (t.bytes == 0 && t.writes == 0 && t.received.empty())) return;
  t.stats->bytes_written.fetch_add(t.bytes, std::memory_order_relaxed);
  t.stats->watch_writes_direct.fetch_add(t.writes, std::memory_order_relaxed);
  t.bytes = t.writes = 0;
  if (t.received.empty()) return;
  const Clock::time_point now = Clock::now();
  metrics::Histogram::Tally tally;
  for (Clock::time_point r : t.received) tally.Count(now - r);
  t.stats->watch_delay.Add(tally);
  ClearKeepingRoom(t.received, 1024);
}

void CountDirectWrite(CacheServeStats& stats, size_t bytes, Clock::time_point received) {
  DirectWriteTally& t = direct_tally;
  if (t.stats != &stats) {
    AddTallyToStats();
    t.stats = &stats;
  }
  t.bytes += bytes;
  if (bytes > 0) ++t.writes;
  if (received != Clock::time_point{}) t.received.push_back(received);
}

// The bookmark due now, if one is. `cache_rv` is the cache's RV read before the batch just
// written was taken: every event at or below it for this watcher was in that batch (the cache
// queues an event and advances its RV under one lock), so a bookmark at it never overtakes one.
std::shared_ptr<const std::string> DueBookmark(WatchRun& w, Clock::time_point now,
                                               uint64_t cache_rv) {
  const WatchParams& p = w.params;
  std::shared_ptr<const std::string> bookmark;
  if (w.first && p.initial_events_end) {
    bookmark = w.cacher.BookmarkFrame(w.watcher->start_rv, w.watcher->filter(), /*end=*/true);
    w.last_rv = std::max(w.last_rv, w.watcher->start_rv);
  } else if (w.proof && w.proof->done) {
    // Proven current (or not: then the scheduled bookmarks follow as usual).
    if (w.proof->proven) {
      w.last_rv = std::max(w.last_rv, cache_rv);
      bookmark = w.cacher.BookmarkFrame(w.last_rv, w.watcher->filter());
    }
    w.proof.reset();
  } else if (p.bookmarks && now >= w.bookmarks.next) {
    // None for a resource the upstream sends none for (no watch cache there: the apiserver
    // watches etcd for it, which sends none); a tier below then tells it apart as well.
    if (w.reflector == nullptr || w.reflector->upstream_bookmarks() != UpstreamBookmarks::kNone) {
      w.last_rv = std::max(w.last_rv, cache_rv);
      bookmark = w.cacher.BookmarkFrame(w.last_rv, w.watcher->filter());
    }
    w.bookmarks.next = w.bookmarks.After(now);
  }
  w.first = false;
  return bookmark;
}

// Takes what the watcher has queued (and a bookmark when one is due) as one body piece: w.bufs,
// w.bytes. No I/O.
void TakeBatch(WatchRun& w, Clock::time_point now) {
  const uint64_t cache_rv = w.cacher.resource_version();  // Before the Take: see DueBookmark.
  w.watcher->Take(&w.batch);
  if (w.batch.last_rv > 0) w.last_rv = w.batch.last_rv;
  w.bookmark = DueBookmark(w, now, cache_rv);
  w.bufs.clear();
  for (const Piece& piece : w.batch.pieces) {
    w.bufs.emplace_back(piece.bytes.data(), piece.bytes.size());
  }
  if (w.bookmark) w.bufs.push_back(asio::buffer(*w.bookmark));
  if (w.params.gzip) {
    if (!w.gzipped) w.gzipped = std::make_unique<WatchGzipHold>();
    CompressBatch(w.batch.pieces, w.bookmark, w.wake->wakeups.gzip_members(), *w.gzipped, w.bufs);
  }
  w.bytes = asio::buffer_size(w.bufs);
  w.taken = true;
}

// After the taken batch was written: lets its frames go (an idle watch keeps no event alive,
// nor a burst's room). False: the watch is over.
bool BatchWritten(WatchRun& w, bool direct) {
  const Clock::time_point received = w.batch.oldest_received;
  if (direct) {
    CountDirectWrite(w.stats, w.bytes, received);
  } else {
    w.stats.bytes_written += w.bytes;
    if (received != Clock::time_point{}) w.stats.watch_delay.Observe(Clock::now() - received);
  }
  const bool closed = w.batch.closed;
  const bool too_slow = closed && w.batch.close_cause == CacheWatcher::CloseCause::kTooSlow;
  CacheWatcher::Release(&w.batch);
  w.bookmark.reset();
  if (w.gzipped) w.gzipped->Clear();
  ClearKeepingRoom(w.bufs, CacheWatcher::kKeptPieces + 1);  // The pieces and a bookmark.
  w.bytes = 0;
  w.taken = w.held = false;
  if (too_slow) {
    // The client is not reading: no polite end can reach it. Drop the connection; the client
    // re-watches from the last RV it received.
    w.error = "watcher too slow";
    return false;
  }
  return !closed;
}

bool DeliverNow(WatchRun& w, Response::WriteDone& done) {
  if (w.taken || w.failed || !w.response.can_write_now() || w.stop.requested) return false;
  const auto now = Clock::now();
  if (now >= w.params.deadline || w.watcher->closed()) return false;
  TakeBatch(w, now);
  if (w.batch.closed) return false;  // The loop writes it and ends the answer.
  return AfterDirectWrite(w, w.response.TryWriteBodyOrQueue(w.bufs, done));
}

bool AfterDirectWrite(WatchRun& w, Response::TryWrite result) {
  switch (result) {
    case Response::TryWrite::kQueued:
      return true;  // Told later (Wakeup::Written); the batch stays taken until then.
    case Response::TryWrite::kWritten:
      return BatchWritten(w, /*direct=*/true);
    case Response::TryWrite::kHeld:
      w.held = true;
      return false;
    case Response::TryWrite::kFailed:
      w.failed = true;
      w.error = "write failed";
      return false;
    case Response::TryWrite::kUnsupported:
      return false;
  }
  return false;
}

}  // namespace

void Wakeup::Wake() {
  if (parked != nullptr && !client_gone && DeliverNow(*parked, *this)) return;
  RunLoop();
}

void Wakeup::Written(Response::TryWrite result) {
  if (parked != nullptr && AfterDirectWrite(*parked, result)) return;
  RunLoop();
}

void Wakeup::PrefetchDeep() const {
  if (parked == nullptr) return;
  response.PrefetchTransport();
  __builtin_prefetch(parked->bufs.data());
}

asio::awaitable<bool> WriteBatch(WatchRun& w, Clock::time_point now) {
  if (w.failed) co_return false;
  if (!w.taken) TakeBatch(w, now);
  if (w.bytes > 0) {
    beast::error_code ec;
    if (w.held) {
      ec = co_await w.response.FinishWrite();
    } else {
      ec = co_await w.response.WriteBody(w.bufs);
    }
    if (ec) {
      w.error = ec.message();
      co_return false;
    }
    ++w.stats.watch_writes_loop;
  }
  co_return BatchWritten(w, /*direct=*/false);
}

void FlushWatchWriteTally() {
  SendBatchedWrites();  // What the burst's direct writes left per connection (HTTP/2).
  AddTallyToStats();
}

}  // namespace kf
