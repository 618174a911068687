#include "proxy/serve/watch_stream.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <random>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/api/cbor.h"
#include "common/api/go_strconv.h"
#include "common/api/kube_proto.h"
#include "common/strings.h"
#include "proxy/serve/consistent_read.h"
#include "proxy/serve/watch_history.h"
#include "proxy/serve/watch_run.h"

namespace kf {
namespace {

namespace http = beast::http;
using Clock = std::chrono::steady_clock;

ResponseHead WatchHead(Encoding encoding, bool gzip = false) {
  ResponseHead head;
  head.fields.set(http::field::cache_control, "no-cache, private");
  head.fields.set(http::field::content_type, encoding == Encoding::kProtobuf
                                                 ? kProtobufWatchContentType
                                             : encoding == Encoding::kCbor ? kCborSeqContentType
                                                                           : "application/json");
  if (gzip) {  // watchResponseWriter.BeginStream.
    head.fields.set(http::field::content_encoding, "gzip");
    head.fields.set(http::field::vary, "Accept-Encoding");
  }
  head.framing = ResponseHead::Framing::kStreamed;
  return head;
}

// Where the watch starts, as the apiserver's watch cache decides; nullopt: declined, or refused
// (`*refused` set: answered) when its state could not be made fresh in time.
asio::awaitable<std::optional<WatchParams>> Plan(Exchange& x, Cacher& cacher, Reflector& reflector,
                                                 CacheServeStats& stats, bool* refused) {
  const Query& q = x.request.info.query;
  WatchParams p;
  p.bookmarks = q.First("allowWatchBookmarks").has_value() &&
                ParseGoBool(*q.First("allowWatchBookmarks")) == true;
  const auto rv = q.First("resourceVersion");
  int64_t timeout_seconds = 0;
  if (auto t = q.First("timeoutSeconds")) (void)absl::SimpleAtoi(ToAbsl(*t), &timeout_seconds);
  p.deadline = WatchDeadline(Clock::now(), timeout_seconds);
  p.progress_request = p.bookmarks && x.request.headers.find(std::string(kProgressRequestHeader)) !=
                                          x.request.headers.end();
  // A legacy watch from "" or "0" that allows bookmarks is a WatchList to the apiserver (its
  // defaulting of sendInitialEvents, watch_gzip.h): its initial events end with the bookmark.
  const bool watch_list = IsWatchListRequest(q);
  if (q.Has("sendInitialEvents") || !rv || rv->empty() || watch_list) {
    // WatchList, or "get state and start at most recent": the state must be at least the
    // requested RV (the upstream's current one for ""); a WatchList's end is a bookmark.
    const Freshness fresh = co_await RequiredVersion(cacher, reflector, rv);
    if (fresh.verdict == Freshness::Verdict::kPassThrough) co_return std::nullopt;
    if (fresh.verdict != Freshness::Verdict::kServe) {
      co_await RefuseUnfresh(x, fresh, stats);
      *refused = true;
      co_return std::nullopt;
    }
    p.initial_events_end = q.Has("sendInitialEvents") || watch_list;
  } else if (*rv != "0") {
    p.rv = ParseGoUint(*rv).value_or(0);  // Cacheable: it parses.
    p.start = Cacher::Start::kAfterVersion;
  }
  co_return p;
}

// Whether the answer is compressed (watch_gzip.h). With --watchlist-gzip=auto, the first
// WatchList accepting gzip asks whether the upstream compresses; until it has answered, the
// cache's answers are plain (what an apiserver without WatchListCompression sends).
bool GzipFor(const Exchange& x, const Cacher& cacher, Reflector& reflector,
             const WatchOptions& options) {
  const Cacher::UpstreamWatchListGzip upstream = cacher.upstream_watchlist_gzip();
  const Query& q = x.request.info.query;
  if (options.watchlist_gzip == WatchListGzip::kAuto &&
      upstream == Cacher::UpstreamWatchListGzip::kUnknown &&
      CompressesWatch(q, x.request.headers, WatchListGzip::kAlways, upstream)) {
    reflector.AskWatchListGzip();
  }
  return CompressesWatch(q, x.request.headers, options.watchlist_gzip, upstream);
}

// Like the apiserver: HTTP 200, one ERROR event carrying the 410 Status, then the end.
asio::awaitable<void> WriteExpired(Exchange& x, const absl::Status& status, Encoding encoding) {
  const KubeStatus expired{410, "Expired", std::string(status.message()), std::nullopt};
  std::string event;
  if (encoding == Encoding::kProtobuf) {
    event = WatchFrame("ERROR", EncodeStatusProto(expired));
  } else if (encoding == Encoding::kCbor) {
    auto object = JsonToCbor(EncodeStatusJson(expired));
    event = std::string(CborFramePrefix("ERROR")) + (object.ok() ? object->bytes : "\xf6");
  } else {
    event = absl::StrCat("{\"type\":\"ERROR\",\"object\":", EncodeStatusJson(expired), "}\n");
  }
  const std::array<asio::const_buffer, 1> body{asio::buffer(event)};
  const beast::error_code ec = co_await WriteAnswer(*x.response, WatchHead(encoding), body);
  if (ec) x.error = ec.message();
}

// Registers the watcher, notified through this thread's Wakeups as `wake`'s slot (the cache
// hands each event's wake-ups to the thread at once; they run on this session's thread).
absl::StatusOr<std::shared_ptr<CacheWatcher>> Register(Cacher& cacher, WatchFilter filter,
                                                       const WatchParams& p, const Wakeup& wake,
                                                       const WatchOptions& options) {
  Cacher::WatchRequest request{std::move(filter), p.start, p.rv, options.max_queue_bytes};
  request.sink = &wake.wakeups;
  request.sink_ref = wake.ref;
  request.total_budget = options.total_queue;
  return cacher.Watch(std::move(request));
}

// A watch once set up (ServeWatch): what its loop and its end need, on the heap, run by the
// transport after the request's coroutine frames have ended (Exchange::detached).
class OpenWatch final : public Detached {
 public:
  OpenWatch(Exchange& x, Cacher& cacher, Reflector& reflector, const std::shared_ptr<Wakeup>& wake,
            const WatchParams& params, const WatchOptions& options, CacheServeStats& stats,
            const asio::any_io_executor& executor, WatchSlots::Slot* slot)
      : slot_(slot != nullptr ? std::move(*slot) : WatchSlots::Slot()),
        stop_(x.stop),
        run_{*x.response,
             x.stop,
             {},
             cacher,
             wake->watcher,
             wake,
             params,
             BookmarkClock{options.bookmark_interval, params.deadline, {}},
             stats} {
    ++stats.open_watches;
    run_.reflector = &reflector;
    x.stop.hook = [weak = std::weak_ptr<Wakeup>(wake)] {
      if (auto w = weak.lock()) {
        w->woken = true;
        w->timer.cancel();
      }
    };
    run_.last_rv = std::max(run_.watcher->start_rv, params.rv);
    run_.bookmarks.next = run_.bookmarks.After(Clock::now());
    if (params.progress_request) {
      run_.proof = std::make_shared<ProgressProof>();
      asio::co_spawn(
          executor,
          [](Cacher& c, Reflector& r, std::shared_ptr<ProgressProof> proof,
             std::weak_ptr<Wakeup> weak) -> asio::awaitable<void> {
            const Freshness current = co_await RequiredVersion(c, r, std::string_view());
            proof->proven = current.verdict == Freshness::Verdict::kServe;
            proof->done = true;
            if (auto w = weak.lock()) {
              w->Wake();
              FlushWatchWriteTally();
            }
          }(cacher, reflector, run_.proof, wake),
          asio::detached);
    }
    // The client's end is watched beside the loop without a second coroutine: it wakes the
    // loop, which then stops, and aborts a write under way.
    x.response->WatchClient(executor, [wake](bool gone) {
      wake->client_told = true;
      if (gone && !wake->client_unwatched) {
        wake->client_gone = true;
        wake->response.Cancel();
      }
      wake->timer.cancel();
    });
  }
  OpenWatch(const OpenWatch&) = delete;
  OpenWatch& operator=(const OpenWatch&) = delete;

  ~OpenWatch() override {
    run_.wake->parked = nullptr;  // (Destroyed parked only when the io_context is.)
    stop_.hook = nullptr;
    --run_.stats.open_watches;
    run_.cacher.RemoveWatcher(run_.watcher.get());
  }

  // Its head could not be written: it only waits for the client's end to be unwatched.
  void HeadFailed() { head_failed_ = true; }

  // The watch runs in short coroutines, one per burst of writes (Active), and between them
  // only a callback on its timer waits (Park): an idle watch keeps no coroutine frame.
  void Start(std::shared_ptr<void> keep, std::function<void()> done) override {
    done_ = std::move(done);
    if (head_failed_) {
      end_answer_ = false;
      Finish(std::move(keep));
      return;
    }
    Spawn(std::move(keep));
  }

  // The same bursts and parking as Start's, in the caller's coroutine (Pipeline::Serve's): no
  // spawn per burst.
  asio::awaitable<void> Run() override {
    WatchRun& w = run_;
    if (head_failed_) end_answer_ = false;
    bool park = !head_failed_;
    while (park) {
      park = co_await Active();
      if (!park) break;
      if (!w.wake->woken) {
        w.wake->timer.expires_at(ParkUntil());
        w.wake->parked = &w;
        co_await w.wake->timer.async_wait(asio::as_tuple(asio::use_awaitable));
        w.wake->parked = nullptr;
      }
      w.wake->woken = false;
    }
    co_await End();
  }

  const std::string& error() const override { return run_.error; }

 private:
  // Writes what is queued until nothing is. True: park (wait for a wake-up or the timer);
  // false: the watch is over (end_answer_ says whether the answer is to be ended politely).
  asio::awaitable<bool> Active() {
    WatchRun& w = run_;
    for (;;) {
      if (w.wake->client_gone) {
        end_answer_ = false;  // Nobody to write to, nor to end the answer for.
        co_return false;
      }
      const auto now = Clock::now();
      // A batch a wake-up took (DeliverNow) and left to this loop: events queued after that
      // take were told by a wake-up that found the batch still taken, and whose `woken` the
      // loop's start cleared (the parked timer's handler, Run). So the queue is looked at again
      // after it, whatever `woken` says; else those events would wait for good (the watcher
      // tells once until the next take).
      const bool taken_before = w.taken;
      const bool more = co_await WriteBatch(w, now);
      if (!more) {
        end_answer_ = w.error.empty();
        co_return false;
      }
      if (w.stop.requested || now >= w.params.deadline) co_return false;
      if (!w.wake->woken && !taken_before) co_return true;
      w.wake->woken = false;
    }
  }

  // A parked watch's timer: its deadline, or its next bookmark.
  Clock::time_point ParkUntil() const {
    const WatchParams& p = run_.params;
    return p.bookmarks ? std::min(p.deadline, run_.bookmarks.next) : p.deadline;
  }

  // The watch's thread: its wake-up's timer's (not a copy of its own, 56 bytes a watch).
  asio::any_io_executor executor() const { return run_.wake->timer.get_executor(); }

  // `keep` goes from handler to handler (never a member: the owner would keep itself).
  void Spawn(std::shared_ptr<void> keep) {
    asio::co_spawn(executor(), Active(),
                   [this, keep = std::move(keep)](const std::exception_ptr& e, bool park) mutable {
                     if (e == nullptr && park) {
                       Park(std::move(keep));
                     } else {
                       if (e != nullptr) end_answer_ = false;
                       Finish(std::move(keep));
                     }
                   });
  }

  // Until the deadline or the next bookmark; a wake-up delivers from Wakeup::Wake (DeliverNow)
  // or cancels the timer, and the callback runs a burst.
  void Park(std::shared_ptr<void> keep) {
    WatchRun& w = run_;
    if (w.wake->woken) {
      // Woken between the burst's end and this handler (no timer was waiting to be cancelled).
      w.wake->woken = false;
      Spawn(std::move(keep));
      return;
    }
    w.wake->timer.expires_at(ParkUntil());
    w.wake->parked = &w;
    w.wake->timer.async_wait(
        [this, keep = std::move(keep)](const beast::error_code& /*ec*/) mutable {
          run_.wake->parked = nullptr;
          run_.wake->woken = false;
          Spawn(std::move(keep));
        });
  }

  // The answer's end (unless the client left or a write failed), then the wait for the
  // client's end to be unwatched; then `done`.
  void Finish(std::shared_ptr<void> keep) {
    asio::co_spawn(executor(), End(),
                   [this, keep = std::move(keep)](const std::exception_ptr& /*e*/) {
                     const std::function<void()> done = std::move(done_);
                     done();  // Last: it may destroy this.
                   });
  }

  asio::awaitable<void> End() {
    if (end_answer_) co_await run_.response.End();
    Wakeup& wake = *run_.wake;
    if (!wake.client_told) {
      wake.client_unwatched = true;
      run_.response.StopWatchingClient();
      while (!wake.client_told) {
        wake.timer.expires_at(Clock::time_point::max());
        co_await wake.timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
    }
    if (wake.client_gone) run_.error = "client closed";
  }

  WatchSlots::Slot slot_;  // Held while the watch is open (WatchSlots).
  StopSignal& stop_;
  bool head_failed_ = false;
  bool end_answer_ = true;
  std::function<void()> done_;
  WatchRun run_;
};

}  // namespace

Clock::time_point WatchDeadline(Clock::time_point now, int64_t timeout_seconds) {
  // The apiserver computes time.Duration(timeoutSeconds) * time.Second, which wraps in int64
  // nanoseconds; zero (given or wrapped) means its default, a random duration in
  // [MinRequestTimeout, 2*MinRequestTimeout); a wrapped negative one has already passed.
  const auto ns = static_cast<int64_t>(static_cast<uint64_t>(timeout_seconds) * 1000000000ull);
  if (ns == 0) {
    std::mt19937 rng(std::random_device{}());
    return now + std::chrono::seconds(std::uniform_int_distribution<int64_t>(1800, 3599)(rng));
  }
  if (ns < 0) return now;
  // Past a century nobody can tell the difference; nearer the limit the clock would overflow.
  constexpr int64_t kCentury = int64_t{100} * 365 * 24 * 3600 * 1000000000;
  return now + std::chrono::nanoseconds(std::min(ns, kCentury));
}

asio::awaitable<bool> ServeWatch(Exchange& x, Cacher& cacher, Reflector& reflector,
                                 const WatchFilter& filter, Wakeups& wakeups,
                                 CacheServeStats& stats, const WatchOptions& options,
                                 const Cacher* witness, WatchSlots::Slot* slot) {
  bool refused = false;
  auto params = co_await Plan(x, cacher, reflector, stats, &refused);
  if (!params) co_return refused;
  params->gzip = GzipFor(x, cacher, reflector, options);
  ++stats.watches;
  auto wake = std::make_shared<Wakeup>(co_await asio::this_coro::executor, *x.response, wakeups);
  auto watcher = Register(cacher, filter, *params, *wake, options);
  if (!watcher.ok() && absl::IsOutOfRange(watcher.status()) &&
      params->start == Cacher::Start::kAfterVersion) {
    watcher = co_await StartBeforeWindow(
        cacher, reflector, witness, filter, params->rv, watcher.status(),
        [&](uint64_t rv) {
          params->rv = rv;
          return Register(cacher, filter, *params, *wake, options);
        },
        stats);
  }
  if (!watcher.ok()) {
    co_await WriteExpired(x, watcher.status(), WireEncoding(cacher, filter));
    co_return true;
  }
  wake->watcher = *watcher;
  // (Named first: GCC 12 miscompiles a co_await's result bound to a reference parameter.)
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto open = std::make_unique<OpenWatch>(x, cacher, reflector, wake, *params, options, stats,
                                          executor, slot);
  // Written here, so the detached watch never reads the request (Detached).
  const beast::error_code head_failed =
      co_await x.response->WriteHead(WatchHead(WireEncoding(cacher, filter), params->gzip));
  if (head_failed) open->HeadFailed();
  x.detached = std::move(open);
  co_return true;
}

}  // namespace kf
