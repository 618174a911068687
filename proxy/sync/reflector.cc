#include "proxy/sync/reflector.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/upstream_list.h"
#include "common/kube_proto.h"
#include "common/protowire.h"
#include "common/strings.h"

namespace kf {
namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr auto kMaxBackoff = std::chrono::milliseconds(30000);
// After a proof that answered several reads, the next starts at most this long after it
// (SharedProof::spaced): at most 20 a second per resource under a fleet of readers.
constexpr auto kProofSpacing = std::chrono::milliseconds(50);
// A content proof lists the whole resource in one page of metadata: up to this many objects.
// Past it a proof is a `limit=1` LIST and a quiet cache waits for a bookmark (RequestProgress).
constexpr size_t kContentProofObjects = 500;
// PartialObjectMetadataList: names and versions without the objects' bodies. JSON after it,
// should the upstream not convert (it then answers the full objects, which carry the same).
constexpr std::string_view kMetadataListAccept =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
// What a protobuf reflector asks for: protobuf only, so a resource without it (a custom
// resource, an aggregated API) answers 406 instead of JSON the reflector cannot read.
constexpr std::string_view kProtobufAccept = kProtobufContentType;
constexpr std::string_view kInitialEventsEnd = "k8s.io/initial-events-end";

}  // namespace

Reflector::Reflector(Cacher& cacher, UpstreamPool& pool, std::function<std::string()> credentials,
                     const Logger& log, asio::any_io_executor executor,
                     std::chrono::milliseconds watch_idle_timeout)
    : cacher_(cacher),
      pool_(pool),
      credentials_(std::move(credentials)),
      log_(log),
      watch_idle_timeout_(watch_idle_timeout),
      exec_(std::move(executor)) {}

bool Reflector::protobuf() const { return cacher_.encoding() == Encoding::kProtobuf; }

std::string_view Reflector::Accept() const {
  return protobuf() ? kProtobufAccept : std::string_view("application/json");
}

std::string Reflector::CollectionPath() const {
  const ResourceType& t = cacher_.type();
  return t.group.empty() ? absl::StrCat("/api/", t.version, "/", t.resource)
                         : absl::StrCat("/apis/", t.group, "/", t.version, "/", t.resource);
}

void Reflector::Stop() {
  stopped_ = true;
  if (active_ != nullptr) active_->Cancel();
  if (progress_active_ != nullptr) progress_active_->Cancel();
  proof_.Abandon();
}

asio::awaitable<void> Reflector::Backoff() {
  // Exponential from 250 ms to 30 s, with full jitter, as client-go's reflector backs off.
  backoff_ =
      backoff_.count() == 0 ? std::chrono::milliseconds(250) : std::min(backoff_ * 2, kMaxBackoff);
  std::uniform_int_distribution<int64_t> jitter(backoff_.count() / 2, backoff_.count());
  // An upstream that said when to come back (429 from API Priority and Fairness, 503) is not
  // asked again sooner; the exponential backoff still applies when it is longer.
  const std::optional<std::chrono::seconds> retry_after = std::exchange(retry_after_, std::nullopt);
  const std::chrono::milliseconds wait =
      RetryWait(retry_after, std::chrono::milliseconds(jitter(rng_)), kMaxBackoff);
  if (retry_after) ++stats_.retry_afters;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(wait);
  co_await timer.async_wait(use_nothrow);
}

std::chrono::steady_clock::duration Reflector::running_for() const {
  const int64_t started = run_started_ns_.load(std::memory_order_relaxed);
  if (started == 0) return {};
  return std::chrono::steady_clock::now().time_since_epoch() - std::chrono::nanoseconds(started);
}

asio::awaitable<void> Reflector::Run() {
  run_started_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count(),
                        std::memory_order_relaxed);
  co_await ProbeBookmarkTemplate();
  // A cache restored from a snapshot is synced already: it watches from the snapshot's RV, and
  // lists only if the upstream answers 410.
  bool need_list = !cacher_.synced();
  listed_once_ = !need_list;
  if (!need_list) {
    log_.Info("resuming the upstream watch from the snapshot",
              {{"resource", cacher_.type().GroupResource()},
               {"resourceVersion", static_cast<int64_t>(cacher_.resource_version())}});
  }
  while (!stopped_) {
    if (need_list) {
      absl::Status s = co_await ListAll();
      if (!s.ok()) {
        ++stats_.errors;
        log_.Warning("upstream list failed",
                     {{"resource", cacher_.type().GroupResource()}, {"error", ToStd(s.message())}});
        co_await Backoff();
        continue;
      }
      need_list = false;
    }
    const WatchEnd end = co_await WatchOnce();
    if (end == WatchEnd::kExpired) {
      need_list = true;  // 410: relist; the Cacher turns the difference into events.
      log_.Info("upstream watch expired, relisting",
                {{"resource", cacher_.type().GroupResource()}});
    } else if (end == WatchEnd::kFailed && !stopped_) {
      ++stats_.errors;
      co_await Backoff();
    }
  }
}

asio::awaitable<absl::Status> Reflector::ListAll() {
  const ResourceType& t = cacher_.type();
  std::vector<ObjectPtr> objects;
  uint64_t list_rv = 0;
  std::string cont;
  do {
    // The first page is a consistent read; the rest follow its continue token (same snapshot).
    std::string target = absl::StrCat(CollectionPath(), "?limit=500");
    if (!cont.empty()) absl::StrAppend(&target, "&continue=", cont);
    auto res = co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                                     std::chrono::seconds(60), Accept());
    if (!res.ok()) co_return res.status();
    if (res->status == 410 && !cont.empty()) {
      objects.clear();  // The snapshot expired mid-list: start over.
      cont.clear();
      continue;
    }
    if (res->status != 200) {
      retry_after_ = res->retry_after;
      list_refused_.store(
          res->status == 401 || res->status == 403 || res->status == 404 || res->status == 406,
          std::memory_order_relaxed);
      co_return absl::UnavailableError(absl::StrCat("LIST ", CollectionPath(), ": HTTP ",
                                                    res->status, ": ", res->body.substr(0, 300)));
    }
    if (protobuf()) {
      ProtoListPage page;
      if (!ParseProtoList(res->body, &page)) {
        co_return absl::DataLossError(absl::StrCat("LIST ", CollectionPath(), ": bad protobuf"));
      }
      if (cont.empty()) list_rv = page.resource_version;
      for (std::string_view item : page.items) {
        auto obj = CachedObject::FromProtobuf(t, std::string(item));
        if (!obj.ok()) co_return obj.status();
        objects.push_back(*std::move(obj));
      }
      cont = page.continue_token;
      continue;
    }
    auto page = ParseListPage(res->body);
    if (!page.ok()) co_return page.status();
    if (cont.empty()) list_rv = page->resource_version;
    const std::string kind = page->kind.substr(0, page->kind.size() - 4);
    for (std::string_view item : page->items) {
      // Built-in list items lack kind and apiVersion; a custom resource's (unstructured) items
      // have them already, in their sorted place.
      auto obj = CachedObject::FromJson(t, t.list_items_have_type_meta
                                               ? std::string(item)
                                               : ItemToEventForm(item, kind, page->api_version));
      if (!obj.ok()) co_return obj.status();
      objects.push_back(*std::move(obj));
    }
    cont = page->continue_token;
  } while (!cont.empty());
  if (listed_once_) ++stats_.relists;
  listed_once_ = true;
  const size_t n = objects.size();
  cacher_.Replace(std::move(objects), list_rv);
  list_refused_.store(false, std::memory_order_relaxed);
  backoff_ = std::chrono::milliseconds(0);
  log_.Info("cache synced", {{"resource", t.GroupResource()},
                             {"objects", static_cast<int64_t>(n)},
                             {"resourceVersion", static_cast<int64_t>(list_rv)}});
  co_return absl::OkStatus();
}

asio::awaitable<Reflector::WatchEnd> Reflector::WatchOnce() {
  // client-go's reflector picks a timeout in [5, 10) minutes; so do we.
  std::uniform_int_distribution<int> timeout(300, 599);
  const std::string target = absl::StrCat(
      CollectionPath(), "?allowWatchBookmarks=true&resourceVersion=", cacher_.resource_version(),
      "&timeoutSeconds=", timeout(rng_), "&watch=true");
  ++stats_.watches;
  auto opened =
      co_await UpstreamWatch::Open(pool_, target, credentials_(), watch_idle_timeout_, Accept());
  if (!opened.ok()) {
    log_.Warning("upstream watch failed", {{"resource", cacher_.type().GroupResource()},
                                           {"error", ToStd(opened.status().message())}});
    co_return WatchEnd::kFailed;
  }
  if (auto* res = std::get_if<UpstreamResponse>(&*opened)) {
    log_.Warning("upstream watch refused",
                 {{"resource", cacher_.type().GroupResource()}, {"status", res->status}});
    retry_after_ = res->retry_after;
    co_return res->status == 410 ? WatchEnd::kExpired : WatchEnd::kFailed;
  }
  std::unique_ptr<UpstreamWatch> watch = std::move(std::get<0>(*opened));
  // A Stop() while the watch was opening found nothing to cancel: the watch would have run
  // its 5-10 minutes and held the process's shutdown as long.
  if (stopped_) co_return WatchEnd::kEnded;
  active_ = watch.get();
  absl::Cleanup clear = [this] { active_ = nullptr; };
  for (;;) {
    auto line = co_await watch->NextEvent(protobuf());
    if (!line.ok() && absl::IsDeadlineExceeded(line.status())) {
      // Open, but silent past the idle timeout. Resume from the cache's RV on a new connection.
      // From an upstream that bookmarks this resource (about once a minute) that is a dead
      // watch: a half-open connection, a stuck proxy. From one that never has (no watch cache
      // there: Events), silence is only a quiet resource, the normal case on a quiet cluster.
      ++stats_.idle_timeouts;
      const bool quiet = !bookmarks_seen_ && upstream_bookmarks() != UpstreamBookmarks::kSent;
      const std::string_view error = ToStd(line.status().message());
      log_.Log(quiet ? Logger::Level::kInfo : Logger::Level::kWarning,
               "upstream watch idle, resuming",
               {{"resource", cacher_.type().GroupResource()},
                {"resourceVersion", static_cast<int64_t>(cacher_.resource_version())},
                {"bookmarked", bookmarks_seen_},
                {"error", error}});
      if (quiet) co_return WatchEnd::kEnded;
      co_return WatchEnd::kFailed;
    }
    if (!line.ok())
      co_return absl::IsNotFound(line.status()) ? WatchEnd::kEnded : WatchEnd::kFailed;
    if (line->empty()) continue;
    switch (ApplyLine(*line)) {
      case LineResult::kEvent:
        ++stats_.events;
        [[fallthrough]];
      case LineResult::kBookmark:
        backoff_ = std::chrono::milliseconds(0);
        break;
      case LineResult::kExpired:
        co_return WatchEnd::kExpired;
      case LineResult::kFailed:
        co_return WatchEnd::kFailed;
    }
  }
}

Reflector::LineResult Reflector::ApplyProtoEvent(std::string_view message) {
  ProtoWatchEvent ev;
  if (!ParseProtoWatchEvent(message, &ev)) return LineResult::kFailed;
  if (ev.type == "ERROR") {
    return ProtoStatusCode(ev.object.raw) == 410 ? LineResult::kExpired : LineResult::kFailed;
  }
  if (ev.type == "BOOKMARK") {
    std::string_view meta, rv;
    uint64_t n = 0;
    if (!FindBytesField(ev.object.raw, 1, &meta) || !FindBytesField(meta, 6, &rv) ||
        !absl::SimpleAtoi(ToAbsl(rv), &n)) {
      return LineResult::kFailed;
    }
    cacher_.Bookmark(n);
    bookmarks_seen_ = true;
    return LineResult::kBookmark;
  }
  const EventType type = ev.type == "ADDED"     ? EventType::kAdded
                         : ev.type == "DELETED" ? EventType::kDeleted
                                                : EventType::kModified;
  auto obj = CachedObject::FromProtobuf(cacher_.type(), std::string(ev.object.raw));
  if (!obj.ok()) return LineResult::kFailed;
  cacher_.Apply(type, *std::move(obj));
  return LineResult::kEvent;
}

Reflector::LineResult Reflector::ApplyLine(std::string_view line) {
  if (protobuf()) return ApplyProtoEvent(line);
  auto ev = ParseWatchLine(line);
  if (!ev.ok()) return LineResult::kFailed;
  if (ev->type == "BOOKMARK") {
    cacher_.Bookmark(ev->resource_version);
    bookmarks_seen_ = true;
    return LineResult::kBookmark;
  }
  if (ev->type == "ERROR")
    return ev->error_code == 410 ? LineResult::kExpired : LineResult::kFailed;
  const EventType type = ev->type == "ADDED"     ? EventType::kAdded
                         : ev->type == "DELETED" ? EventType::kDeleted
                                                 : EventType::kModified;
  auto obj = CachedObject::FromJson(cacher_.type(), std::string(ev->object));
  if (!obj.ok()) return LineResult::kFailed;
  cacher_.Apply(type, *std::move(obj));
  return LineResult::kEvent;
}

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
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_consistent_passthrough_.load(std::memory_order_relaxed);
  if (now < next) return false;
  const int64_t then = now + std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count();
  if (!next_consistent_passthrough_.compare_exchange_strong(next, then)) return false;
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

}  // namespace kf
