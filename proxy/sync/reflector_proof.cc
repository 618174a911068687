// The reflector's freshness proofs (shared per resource, by content or by an RV probe) and its
// progress watch: what lets a consistent read be served from the cache (consistent_read.h).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/listed_versions.h"
#include "common/api/cbor.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/api/upstream_list.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/sync/reflector.h"

namespace kf {
namespace {

// After a proof that answered several reads, the next starts at most this long after it
// (SharedProof::spaced): at most 20 a second per resource under a fleet of readers.
constexpr auto kProofSpacing = std::chrono::milliseconds(50);
// A content proof lists the whole resource in one page of metadata: up to this many objects.
// Past it a proof is a `limit=1` LIST and a quiet cache waits for a bookmark (RequestProgress).
constexpr size_t kContentProofObjects = 500;
constexpr std::string_view kInitialEventsEnd = "k8s.io/initial-events-end";

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Reflector::ProbeUpstreamVersion(std::function<void(std::optional<uint64_t>)> done) {
  asio::post(exec_, [this, done = std::move(done)]() mutable {
    if (stopped_) {
      done(std::nullopt);
      return;
    }
    if (proof_.Join(std::move(done))) asio::co_spawn(exec_, ProbeLoop(), asio::detached);
  });
}

asio::awaitable<void> Reflector::ProbeLoop() {
  // Each proof answers the reads that joined before it started; reads that join meanwhile wait
  // for the next, which starts as soon as this one ends (after the spacing, under a fleet).
  asio::steady_timer timer(exec_);
  while (!stopped_) {
    const auto next = last_proof_start_ + kProofSpacing;
    if (proof_.queued() > 0 && proof_.spaced() && std::chrono::steady_clock::now() < next) {
      timer.expires_at(next);
      co_await timer.async_wait(use_nothrow);
    }
    if (stopped_ || !proof_.Start()) break;  // None queued: the loop ends.
    last_proof_start_ = std::chrono::steady_clock::now();
    const std::optional<uint64_t> rv = co_await ProveOnce();
    proof_.Finish(rv);
  }
  if (stopped_) proof_.Abandon();
}

asio::awaitable<std::optional<uint64_t>> Reflector::ProveOnce() {
  ++stats_.rv_probes;
  const bool by_content =
      !content_proof_refused_ && cacher_.synced() && cacher_.object_count() < kContentProofObjects;
  const std::string target =
      absl::StrCat(CollectionPath(), "?limit=", by_content ? kContentProofObjects : size_t{1});
  auto res = co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                                   std::chrono::seconds(10),
                                   by_content ? kMetadataListAccept : "application/json");
  if (!res.ok()) co_return std::nullopt;
  if (res->status != 200) {
    // An upstream that cannot list this resource's metadata (406) still answers limit=1.
    if (by_content && res->status == 406) content_proof_refused_ = true;
    co_return std::nullopt;
  }
  auto page = ParseListPage(res->body);
  if (!page.ok()) co_return std::nullopt;
  const uint64_t rv = page->resource_version;
  // Every object at `rv` in one page: when the store holds the same, the cache is current.
  if (by_content && page->continue_token.empty() && cacher_.resource_version() < rv) {
    if (auto listed = ListedVersions(*page); listed.ok()) cacher_.ProveCurrent(rv, *listed);
  }
  co_return rv;
}

bool Reflector::TakeConsistentPassthrough(std::chrono::milliseconds interval) {
  if (interval.count() <= 0 || !cacher_.synced()) return false;
  const int64_t now = SteadyNowNs();
  int64_t next = next_consistent_passthrough_.load(std::memory_order_relaxed);
  if (now < next) return false;
  const int64_t then = now + std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count();
  if (!next_consistent_passthrough_.compare_exchange_strong(next, then)) return false;
  ++stats_.consistent_passthroughs;
  return true;
}

bool Reflector::TakeConsistentGetPassthrough(uint32_t per_second) {
  if (!cacher_.synced() || !get_passthrough_budget_.Take(per_second, SteadyNowNs())) return false;
  ++stats_.consistent_passthroughs;
  return true;
}

void Reflector::RequestProgress(uint64_t rv, std::chrono::milliseconds for_how_long,
                                bool upstream_has_it) {
  asio::post(exec_, [this, rv, for_how_long, upstream_has_it] {
    if (stopped_ || cacher_.resource_version() >= rv) return;
    progress_target_ = std::max(progress_target_, rv);
    if (upstream_has_it) progress_upstream_target_ = std::max(progress_upstream_target_, rv);
    progress_until_ = std::max(progress_until_, std::chrono::steady_clock::now() + for_how_long);
    if (!progress_running_) {
      progress_running_ = true;
      asio::co_spawn(exec_, ProgressLoop(), asio::detached);
    }
  });
}

asio::awaitable<void> Reflector::ProgressLoop() {
  // A moment for the main watch first: on a busy resource the event that gets the cache there
  // is usually already on its way.
  asio::steady_timer timer(exec_);
  timer.expires_after(std::chrono::milliseconds(20));
  co_await timer.async_wait(use_nothrow);
  int failures = 0;
  while (!stopped_ && cacher_.resource_version() < progress_target_ &&
         std::chrono::steady_clock::now() < progress_until_ && failures < 3) {
    if (!co_await ProgressWatch()) {
      ++failures;
      timer.expires_after(std::chrono::milliseconds(100 * failures));
      co_await timer.async_wait(use_nothrow);
    }
  }
  progress_running_ = false;
}

asio::awaitable<bool> Reflector::ProgressWatch() {
  const std::string target = absl::StrCat(
      CollectionPath(), "?allowWatchBookmarks=true&resourceVersion=", cacher_.resource_version(),
      "&timeoutSeconds=3&watch=true");
  ++stats_.progress_watches;
  // An RV the upstream had reached before this watch opened: its bookmark must come.
  const uint64_t reached = progress_upstream_target_;
  auto opened = co_await UpstreamWatch::Open(pool_, target, credentials_(),
                                             std::chrono::seconds(10), Accept(),
                                             /*progress_request=*/true);
  if (!opened.ok() || opened->index() != 0) co_return false;
  std::unique_ptr<UpstreamWatch> watch = std::move(std::get<0>(*opened));
  if (stopped_) co_return false;  // Stopped while it opened (see WatchOnce).
  progress_active_ = watch.get();
  absl::Cleanup clear = [this] { progress_active_ = nullptr; };
  for (;;) {
    auto line = co_await watch->NextEvent(protobuf());
    if (!line.ok()) {
      // Ended without any bookmark, still short of an RV the upstream had reached: it cannot
      // prove this resource current (no watch cache there; or a kube-fanout upstream that
      // found so, and so sends none).
      const bool ended = absl::IsNotFound(line.status());
      if (ended && !stopped_ && cacher_.resource_version() < reached &&
          upstream_bookmarks() != UpstreamBookmarks::kSent) {
        SetUpstreamBookmarks(UpstreamBookmarks::kNone);
      }
      co_return ended;
    }
    if (line->empty()) continue;
    switch (ApplyLine(*line)) {
      case LineResult::kEvent:
        if (cacher_.resource_version() >= progress_target_) co_return true;
        break;
      case LineResult::kBookmark:
        // At or past an RV the upstream had reached: it proved progress. (A bookmark short of
        // it proves nothing: a kube-fanout upstream's scheduled one, sent before its proof.)
        if (reached > 0 && cacher_.resource_version() >= reached) {
          SetUpstreamBookmarks(UpstreamBookmarks::kSent);
        }
        co_return true;  // Dropping the connection ends the watch early.
      case LineResult::kExpired:
      case LineResult::kFailed:
        co_return false;
    }
  }
}

std::string_view UpstreamBookmarksName(UpstreamBookmarks b) {
  switch (b) {
    case UpstreamBookmarks::kSent:
      return "sent";
    case UpstreamBookmarks::kNone:
      return "none";
    case UpstreamBookmarks::kUnknown:
      break;
  }
  return "unknown";
}

void Reflector::SetUpstreamBookmarks(UpstreamBookmarks b) {
  const UpstreamBookmarks was = stats_.upstream_bookmarks.exchange(b, std::memory_order_relaxed);
  if (was == b) return;
  if (b == UpstreamBookmarks::kNone) {
    log_.Info(
        "the upstream sends no bookmarks for this resource (no watch cache): consistent reads "
        "it cannot prove current go to the upstream",
        {{"resource", cacher_.type().GroupResource()}});
  } else if (was == UpstreamBookmarks::kNone) {
    log_.Info("the upstream sends bookmarks for this resource again",
              {{"resource", cacher_.type().GroupResource()}});
  }
}

asio::awaitable<void> Reflector::ProbeBookmarkTemplate() {
  // A WatchList request selecting nothing ("-" is never a valid name) answers with just its
  // end-of-initial-events bookmark: the exact bookmark object the apiserver writes for this
  // kind, zero-value fields and all. Without the annotation it is our bookmark template.
  const std::string target =
      absl::StrCat(CollectionPath(),
                   "?allowWatchBookmarks=true&fieldSelector=metadata.name%3D-&resourceVersionMatch="
                   "NotOlderThan&sendInitialEvents=true&timeoutSeconds=5&watch=true");
  auto opened = co_await UpstreamWatch::Open(pool_, target, credentials_(),
                                             std::chrono::seconds(10), Accept());
  if (!opened.ok() || opened->index() != 0) co_return;
  auto line = co_await std::get<0>(*opened)->NextEvent(protobuf());
  if (!line.ok()) co_return;
  if (protobuf()) {
    ProtoWatchEvent pev;
    if (!ParseProtoWatchEvent(*line, &pev) || pev.type != "BOOKMARK") co_return;
    auto object = SpliceProtoMetadata(pev.object.raw, 0, nullptr, kInitialEventsEnd);
    if (object.ok()) cacher_.SetBookmarkTemplate(*std::move(object));
    co_return;
  }
  auto ev = ParseWatchLine(*line);
  if (!ev.ok() || ev->type != "BOOKMARK") co_return;
  std::string object(ev->object);
  constexpr std::string_view kMarker = ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}";
  if (size_t at = object.find(kMarker); at != std::string::npos) object.erase(at, kMarker.size());
  cacher_.SetBookmarkTemplate(std::move(object));
}

void Reflector::AskProbe(ProbeTurn& turn, std::function<bool()> known,
                         asio::awaitable<void> (Reflector::*probe)()) {
  asio::post(exec_, [this, &turn, known = std::move(known), probe] {
    const auto now = std::chrono::steady_clock::now();
    if (stopped_ || turn.running || now < turn.next || known()) return;
    turn.running = true;
    turn.next = now + std::chrono::seconds(5);
    asio::co_spawn(
        exec_,
        [this, &turn, probe]() -> asio::awaitable<void> {
          co_await (this->*probe)();
          turn.running = false;
        },
        asio::detached);
  });
}

void Reflector::AskCbor() {
  AskProbe(
      cbor_probe_,
      [this] { return protobuf() || cacher_.upstream_cbor() != Cacher::UpstreamCbor::kUnknown; },
      &Reflector::ProbeCbor);
}

void Reflector::AskDrop() {
  AskProbe(
      drop_probe_, [this] { return cacher_.upstream_drop() != Cacher::UpstreamDrop::kUnknown; },
      &Reflector::ProbeDrop);
}

void Reflector::AskWatchListGzip() {
  AskProbe(
      gzip_probe_,
      [this] {
        return cacher_.upstream_watchlist_gzip() != Cacher::UpstreamWatchListGzip::kUnknown;
      },
      &Reflector::ProbeWatchListGzip);
}

asio::awaitable<void> Reflector::ProbeCbor() {
  // A LIST selecting nothing ("-" is never a valid name) in CBOR: an apiserver whose
  // CBORServingAndStorage gate is on answers application/cbor, one whose gate is off 406 (a
  // kube-fanout above answers as its own upstream does). No answer: asked again by a later
  // CBOR request (AskCbor); meanwhile CBOR requests pass through.
  const std::string target = absl::StrCat(CollectionPath(), "?fieldSelector=metadata.name%3D-");
  auto res = co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                                   std::chrono::seconds(5), kCborContentType);
  if (!res.ok() || res->status == 429 || res->status >= 500) co_return;
  const bool serves =
      res->status == 200 && absl::StartsWith(res->content_type, ToAbsl(kCborContentType));
  cacher_.SetUpstreamCbor(serves);
  log_.Info(serves ? "the upstream serves CBOR for this resource: the cache answers it"
                   : "the upstream does not serve CBOR for this resource: it answers CBOR requests",
            {{"resource", cacher_.type().GroupResource()}});
}

asio::awaitable<void> Reflector::ProbeDrop() {
  // Two LISTs selecting nothing: drop=metadata.managedFields, which an apiserver answers 200
  // whether it reads the parameter or not, and a target no apiserver knows, which one that reads
  // it (1.38's ManagedFieldsOptOut on) refuses, 406, and one that does not (1.36; the gate off)
  // ignores, 200. Anything else (no answer, a refusal): asked again by a later request.
  const std::string target = absl::StrCat(CollectionPath(), "?fieldSelector=metadata.name%3D-");
  auto known = co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                                     std::chrono::seconds(5),
                                     "application/json;drop=metadata.managedFields");
  if (!known.ok() || known->status != 200) co_return;
  auto unknown =
      co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                            std::chrono::seconds(5), "application/json;drop=kube-fanout.io/probe");
  if (!unknown.ok() || (unknown->status != 200 && unknown->status != 406)) co_return;
  const bool honours = unknown->status == 406;
  cacher_.SetUpstreamDrop(honours);
  log_.Info(honours ? "the upstream leaves managedFields out for drop=metadata.managedFields: the "
                      "cache answers such reads without them"
                    : "the upstream ignores drop=: the cache answers such reads whole, as it does",
            {{"resource", cacher_.type().GroupResource()}});
}

asio::awaitable<void> Reflector::ProbeWatchListGzip() {
  // A WatchList selecting (in practice) nothing, by a label (a label selector, unlike one by
  // metadata.name across namespaces, an upstream kube-fanout answers from its cache too), from
  // resourceVersion 0 (no wait for a fresh cache upstream), asking for gzip: an apiserver with
  // WatchListCompression on (1.37) answers "Content-Encoding: gzip", an older one or one with
  // the gate off a plain stream. Only the head is read. No answer: asked again by a later
  // request; meanwhile WatchLists from the cache are not compressed.
  const std::string target = absl::StrCat(
      CollectionPath(),
      "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0"
      "&allowWatchBookmarks=true&timeoutSeconds=1"
      "&labelSelector=kube-fanout.io%2Fwatchlist-gzip-probe%3Dnone");
  auto opened = co_await UpstreamWatch::Open(pool_, target, credentials_(), std::chrono::seconds(5),
                                             "application/json", false, "gzip");
  if (!opened.ok()) co_return;
  bool compresses = false;
  if (auto* watch = std::get_if<std::unique_ptr<UpstreamWatch>>(&*opened)) {
    compresses = (*watch)->content_encoding() == "gzip";
    (*watch)->Cancel();
  } else {
    const UpstreamResponse& res = std::get<UpstreamResponse>(*opened);
    if (res.status == 429 || res.status >= 500) co_return;
  }
  cacher_.SetUpstreamWatchListGzip(compresses);
  log_.Info(compresses ? "the upstream compresses WatchList answers: so does the cache"
                       : "the upstream does not compress WatchList answers: nor does the cache",
            {{"resource", cacher_.type().GroupResource()}});
}

}  // namespace kf
