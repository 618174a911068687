// Reflector: the one upstream LIST + WATCH of one cached resource. Lists (paginated, consistent)
// into the Cacher, then watches from the list's resourceVersion with bookmarks on; a watch that
// drops or times out resumes from the cache's RV without relisting; only a 410 relists, and the
// Cacher turns the difference into events so downstream watches continue. Backs off with
// jitter between failures; endpoint failover is the pool's and keeps the RV.
//
// Also what consistent reads need (see ProbeUpstreamVersion, RequestProgress): the upstream's
// current RV, and a way to make a quiet resource's cache prove it has reached it.
//
// Runs as coroutines on one io thread (its executor); uses kube-fanout's own credentials.
#ifndef KUBE_FANOUT_SYNC_REFLECTOR_H_
#define KUBE_FANOUT_SYNC_REFLECTOR_H_

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cacher.h"
#include "common/log.h"
#include "proxy/sync/passthrough_budget.h"
#include "proxy/sync/shared_proof.h"
#include "proxy/upstream/upstream_client.h"

namespace kf {

// Whether the upstream can prove this cache current (RequestProgress): whether it sends
// bookmarks on this resource's watches. The apiserver's watch cache does. A resource it serves
// from etcd never gets one (Events by default: the apiserver's --watch-cache-sizes gives them
// no watch cache), so a quiet one can never be proven current and its reads are the
// apiserver's, as they are when the apiserver serves them itself.
enum class UpstreamBookmarks {
  kUnknown,  // Not yet told apart: no proof was needed yet, or the cache caught up by events.
  kSent,     // A progress watch's bookmark brought the cache to an RV the upstream had reached.
  kNone,     // A progress watch opened from behind such an RV ended without any bookmark.
};
std::string_view UpstreamBookmarksName(UpstreamBookmarks b);

struct ReflectorStats {
  std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> watches{0};  // Upstream watch requests made.
  std::atomic<uint64_t> relists{0};  // LISTs after the first.
  std::atomic<uint64_t> errors{0};
  // Watches dropped after --upstream-watch-idle-timeout without a byte (then resumed).
  std::atomic<uint64_t> idle_timeouts{0};
  // Failures answered with a Retry-After that the next attempt waited for.
  std::atomic<uint64_t> retry_afters{0};
  // Freshness proofs: consistent LISTs of the resource, each shared by every read waiting
  // when it started (SharedProof).
  std::atomic<uint64_t> rv_probes{0};
  std::atomic<uint64_t> progress_watches{0};  // Short watches opened to prove progress.
  // Consistent reads sent to the apiserver at once, within the budget (TakeConsistentPassthrough).
  std::atomic<uint64_t> consistent_passthroughs{0};
  std::atomic<UpstreamBookmarks> upstream_bookmarks{UpstreamBookmarks::kUnknown};
  // Self-checks (CheckConsistency), by outcome.
  std::atomic<uint64_t> checks_consistent{0};
  std::atomic<uint64_t> checks_inconsistent{0};  // Each one relisted the resource.
  std::atomic<uint64_t> checks_expired{0};       // 410: the upstream no longer had the RV.
  std::atomic<uint64_t> checks_failed{0};        // Any other failure to list.
  // Watch history filled in from the upstream (Backfill), by outcome.
  std::atomic<uint64_t> backfills_filled{0};
  std::atomic<uint64_t> backfills_too_old{0};  // 410: the upstream no longer had the RV.
  std::atomic<uint64_t> backfills_failed{0};   // No answer in time, or it did not fit.
};

// What a Backfill came to.
struct BackfillResult {
  enum class Kind {
    kFilled,     // The window reaches the RV now.
    kNotNeeded,  // Nothing to fill (the window reaches it, or cannot be filled).
    kTooOld,     // The upstream answered 410 (`message`, its Status's).
    kFailed,     // No answer in time, or the history did not fit the window.
  };
  Kind kind = Kind::kFailed;
  std::string message;
};

// What one self-check found.
enum class CheckResult { kSkipped, kConsistent, kInconsistent, kExpired, kFailed };

// PartialObjectMetadataList: names and versions without the objects' bodies (freshness proofs,
// self-checks). JSON after it, should the upstream not convert (it then answers the full
// objects, which carry the same).
inline constexpr std::string_view kMetadataListAccept =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

// The apiserver sends a watch that allows bookmarks one about every minute, however quiet the
// resource: a longer silence means the watch is dead (a half-open connection, a stuck proxy).
inline constexpr std::chrono::milliseconds kDefaultWatchIdleTimeout = std::chrono::minutes(2);

class Reflector {
 public:
  // `credentials` returns the Authorization header for kube-fanout's own requests.
  // `watch_idle_timeout`: how long the main watch may stay silent before it is dropped and
  // resumed from the cache's RV.
  Reflector(Cacher& cacher, UpstreamPool& pool, std::function<std::string()> credentials,
            const Logger& log, asio::any_io_executor executor,
            std::chrono::milliseconds watch_idle_timeout = kDefaultWatchIdleTimeout);

  asio::awaitable<void> Run();
  void Stop();  // On the reflector's thread.

  // --- Consistent reads; callable from any thread ------------------------------------------
  // Calls `done` (on the reflector's thread) with the upstream's current resourceVersion, read
  // by a proof (a consistent LIST of this resource) that started after this call, or nullopt
  // if the proof failed. Callers share proofs (SharedProof): one in flight at a time, each
  // answering everyone who asked before it started; after one that answered several, the next
  // starts at most 20 a second (a lone sequential reader's follow each other at once). While the
  // cache holds fewer than kContentProofObjects objects the proof lists them all (metadata only):
  // when the cache holds exactly those objects at those versions it is proven current at the list's
  // RV at once (Cacher::ProveCurrent), with no wait for a bookmark; otherwise (limit=1) the cache
  // must reach that RV by events or RequestProgress.
  void ProbeUpstreamVersion(std::function<void(std::optional<uint64_t>)> done);
  // Makes the cache reach `rv` within about two seconds even if the resource is quiet, for up
  // to `for_how_long`: the main watch only carries this resource's events and a bookmark a
  // minute, so a short second watch is opened from the cache's RV; the apiserver sends its
  // events, then a bookmark 2 s before its deadline (timeoutSeconds=3 → after about 1 s), at
  // its current RV. Every event up to that bookmark arrived on that stream, in order, so the
  // cache may advance to it. Events both watches deliver are applied once (by RV).
  // `upstream_has_it`: `rv` is the upstream's own (a probe's), so a watch of a resource with a
  // watch cache carries a bookmark at `rv` or later; ending without one tells kNone.
  void RequestProgress(uint64_t rv, std::chrono::milliseconds for_how_long,
                       bool upstream_has_it = false);
  // What the upstream's progress watches of this resource have shown; any thread. Told apart
  // by the first consistent read whose proof ends either way (no request is made just to
  // tell: the upstream pays for none a cache does not need). Not from the main watch's
  // bookmarks: a kube-fanout upstream sends those from its cache whatever its own upstream is.
  // kSent stays; kNone stays until a proof succeeds (none is tried while it holds: its reads
  // go to the upstream).
  UpstreamBookmarks upstream_bookmarks() const {
    return stats_.upstream_bookmarks.load(std::memory_order_relaxed);
  }
  // One consistent read (LIST or GET without resourceVersion) per `interval` may go to the
  // apiserver at once instead of waiting for the proof above (which, on a quiet resource, waits
  // for the apiserver's bookmark timer: 1-2 s). True: this read is the one (it costs the
  // apiserver what it would cost direct). False (interval 0, spent, not synced): prove and serve
  // from the cache, as every read did before.
  bool TakeConsistentPassthrough(std::chrono::milliseconds interval);
  // Besides that turn, a consistent GET of one object may go to the apiserver at once while the
  // resource's come slower than `per_second` (PassthroughBudget: a GET costs the apiserver less
  // than a proof shared by few). True: this GET is one. False (0, too many, not synced): as
  // above.
  bool TakeConsistentGetPassthrough(uint32_t per_second);

  // --- Watch history (backfill.cc) ----------------------------------------------------------
  // Fills the cache's window back to `rv` (Cacher::HistoryNeeded, InsertHistory) for a watch
  // resumed from before a window that begins at a LIST (a start without a snapshot, a relist):
  // one short upstream watch from `rv` with bookmarks (timeoutSeconds=3: the apiserver's
  // bookmark comes about a second in), its events up to the window's start kept, up to the
  // first event or bookmark at or past it; when an update there is an object's first, the
  // resource listed at exactly `rv` too (its state before). One fill at a time per cache: an ask
  // from an RV at or after the running fill's waits for it; an older one starts the next, from the
  // oldest RV waiting. Any thread; `done` runs on the reflector's thread.
  void Backfill(uint64_t rv, std::function<void(BackfillResult)> done);
  // Whether the upstream serves CBOR for this resource (Cacher::upstream_cbor), asked when the
  // first client asks for CBOR: one LIST selecting nothing, at most one at a time and one every
  // 5 s while unanswered; any thread. No client asking, no request: a start (from a snapshot
  // too) costs the upstream no LIST for it.
  void AskCbor();
  // What the upstream does with drop= (Cacher::upstream_drop), asked when the first client
  // sends it: two LISTs selecting nothing, as AskCbor's.
  void AskDrop();
  // Whether the upstream compresses its WatchList answers for a client accepting gzip
  // (Cacher::upstream_watchlist_gzip), asked when the first such WatchList comes with
  // --watchlist-gzip=auto: one WatchList selecting nothing, from resourceVersion 0, with
  // Accept-Encoding: gzip; its head read and the stream dropped. At most one at a time and one
  // every 5 s while unanswered; any thread.
  void AskWatchListGzip();

  // --- Self-check (self_check.cc); on the reflector's thread ---------------------------------
  // Compares the cache's objects (names, namespaces and resourceVersions) with the upstream's
  // list at the cache's exact resourceVersion (metadata only, paginated). On a difference: logs
  // it (the first keys that differ), counts it and relists the resource. Skipped while the
  // cache has not synced; a 410 (the upstream no longer serves that RV) skips the round.
  asio::awaitable<CheckResult> CheckConsistency();

  const ReflectorStats& stats() const { return stats_; }
  // True while the upstream's last answer to this cache's LIST was a refusal that retrying
  // will not change soon (401, 403, 404, 406: kube-fanout may not list it, or the upstream does
  // not serve it in this encoding): the cache cannot be counted on to sync, so its requests
  // are the apiserver's to answer. Any thread.
  bool list_refused() const { return list_refused_.load(std::memory_order_relaxed); }
  // How long since Run() started (zero before): while the cache has not synced, how long it
  // has been initializing. Any thread.
  std::chrono::steady_clock::duration running_for() const;
  // The collection path, e.g. "/apis/discovery.k8s.io/v1/endpointslices".
  std::string CollectionPath() const;

 private:
  enum class WatchEnd { kEnded, kExpired, kFailed };
  asio::awaitable<absl::Status> ListAll();
  // One page of a LIST of this resource (the cache's encoding): its objects appended to
  // `objects`, and what its ListMeta says.
  struct PageMeta {
    uint64_t resource_version = 0;
    bool shard_info = false;
    std::string continue_token;
  };
  absl::StatusOr<PageMeta> ReadPage(std::string_view body, std::vector<ObjectPtr>* objects) const;
  // The first page's RV; notes whether the upstream shards (its ListMeta.shardInfo).
  uint64_t FirstPage(uint64_t list_rv, bool shard_info);
  asio::awaitable<WatchEnd> WatchOnce();
  // The end of a watch open but silent past the idle timeout, counted and logged: a failure (a
  // dead watch), or only an end when no bookmark was seen and none is known to be sent.
  WatchEnd IdleEnd(const absl::Status& status);
  asio::awaitable<void> ProbeBookmarkTemplate();
  asio::awaitable<void> ProbeCbor();
  asio::awaitable<void> ProbeDrop();
  asio::awaitable<void> ProbeWatchListGzip();
  // A probe's turn (AskCbor, AskWatchListGzip): running, and when the next may start.
  struct ProbeTurn {
    bool running = false;
    std::chrono::steady_clock::time_point next{};
  };
  // Runs `probe` on the reflector's thread unless the reflector stopped, `known()` says the
  // answer is in, one runs, or the last started within 5 s.
  void AskProbe(ProbeTurn& turn, std::function<bool()> known,
                asio::awaitable<void> (Reflector::*probe)());
  asio::awaitable<void> Backoff();
  asio::awaitable<void> ProbeLoop();
  asio::awaitable<std::optional<uint64_t>> ProveOnce();
  asio::awaitable<void> ProgressLoop();
  asio::awaitable<bool> ProgressWatch();
  void SetUpstreamBookmarks(UpstreamBookmarks b);
  asio::awaitable<void> BackfillLoop();
  asio::awaitable<BackfillResult> BackfillOnce(uint64_t after_rv, uint64_t through_rv);
  // Puts a fill's events into the cache (Cacher::InsertHistory), with the state before them
  // (ListAt) when an update among them needs it; false when they did not fit.
  asio::awaitable<bool> KeepHistory(uint64_t after_rv, uint64_t through_rv,
                                    std::vector<Cacher::HistoryEvent> events);
  // Every object at exactly `rv` (resourceVersionMatch=Exact, paginated): the state before a
  // fill's events, when an update among them is an object's first there.
  asio::awaitable<absl::StatusOr<std::vector<ObjectPtr>>> ListAt(uint64_t rv);
  // The upstream's (key, resourceVersion) pairs at exactly `rv`, every page; a failed
  // UpstreamResponse's status when it answered otherwise (410: too old).
  asio::awaitable<absl::StatusOr<std::vector<Cacher::Listed>>> ListVersionsAt(uint64_t rv,
                                                                              int* status);
  // A page of a LIST at exactly `rv`: the first (naming it), or the one `cont` continues to.
  std::string ExactListTarget(uint64_t rv, std::string_view cont) const;
  // Relists at once: the current watch ends and Run() lists again (the Cacher turns the
  // difference into events).
  void Relist();
  // Applies one upstream watch line to the cache; kExpired/kFailed end the stream.
  enum class LineResult { kEvent, kBookmark, kExpired, kFailed };
  LineResult ApplyLine(std::string_view line);
  // One upstream watch line, read (JSON or protobuf, as the cache holds).
  struct UpstreamLine {
    LineResult result = LineResult::kFailed;
    EventType type = EventType::kAdded;  // kEvent: the event and its object.
    ObjectPtr object;
    uint64_t rv = 0;    // kBookmark: its RV.
    std::string error;  // kExpired: the Status's message.
  };
  UpstreamLine ParseLine(std::string_view line) const;
  UpstreamLine ParseProtoLine(std::string_view message) const;
  // The cache holds protobuf: every request but the RV probe asks for protobuf.
  bool protobuf() const;
  std::string_view Accept() const;

  Cacher& cacher_;
  UpstreamPool& pool_;
  std::function<std::string()> credentials_;
  const Logger& log_;
  ReflectorStats stats_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::chrono::milliseconds backoff_{0};
  // The last refusal's Retry-After, for the next Backoff.
  std::optional<std::chrono::seconds> retry_after_;
  std::chrono::milliseconds watch_idle_timeout_;
  bool stopped_ = false;
  UpstreamWatch* active_ = nullptr;
  UpstreamWatch* progress_active_ = nullptr;
  bool listed_once_ = false;
  bool relist_requested_ = false;  // Relist(): the next end of the watch lists again.
  // A bookmark came on one of this resource's watches: the upstream bookmarks it, so a watch
  // silent past the idle timeout is dead rather than quiet.
  bool bookmarks_seen_ = false;
  std::atomic<bool> list_refused_{false};
  std::atomic<int64_t> run_started_ns_{0};  // steady_clock, set by Run().

  // Consistent-read state; on the reflector's thread only.
  asio::any_io_executor exec_;
  SharedProof proof_;
  std::chrono::steady_clock::time_point last_proof_start_{};
  // The upstream refused a metadata-only list of this resource: proofs list with limit=1.
  bool content_proof_refused_ = false;
  uint64_t progress_target_ = 0;
  uint64_t progress_upstream_target_ = 0;  // The highest target the upstream had reached.
  std::chrono::steady_clock::time_point progress_until_{};
  bool progress_running_ = false;
  // Backfill's asks, (rv, done), and its running fill; on the reflector's thread.
  std::vector<std::pair<uint64_t, std::function<void(BackfillResult)>>> backfill_waiting_;
  bool backfill_running_ = false;
  asio::steady_timer* backoff_timer_ = nullptr;  // Backoff's wait, for Stop to cut short.
  // AskCbor's and AskWatchListGzip's probes; on the reflector's thread.
  ProbeTurn cbor_probe_;
  ProbeTurn drop_probe_;
  ProbeTurn gzip_probe_;
  UpstreamWatch* backfill_active_ = nullptr;
  // TakeConsistentPassthrough's budget: when the next may go (steady clock, ns); any thread.
  std::atomic<int64_t> next_consistent_passthrough_{0};
  PassthroughBudget get_passthrough_budget_;  // TakeConsistentGetPassthrough's; any thread.
};

}  // namespace kf

#endif  // KUBE_FANOUT_SYNC_REFLECTOR_H_
