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
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/api/upstream_list.h"
#include "common/strings.h"
#include "common/use_nothrow.h"

namespace kf {
namespace {

constexpr auto kMaxBackoff = std::chrono::milliseconds(30000);
// What a protobuf reflector asks for: protobuf only, so a resource without it (a custom
// resource, an aggregated API) answers 406 instead of JSON the reflector cannot read.
constexpr std::string_view kProtobufAccept = kProtobufContentType;
// The LIST's query: pages of 500, and a shard selector of the whole hash space, which selects
// every object and tells by the answer's ListMeta.shardInfo whether the upstream shards
// (KEP-5866: an apiserver without the ShardedListAndWatch gate ignores the parameter).
constexpr std::string_view kListQuery =
    "?limit=500&shardSelector=shardRange%28object.metadata.uid%2C%270x0000000000000000%27%2C"
    "%270x10000000000000000%27%29";

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
  if (backfill_active_ != nullptr) backfill_active_->Cancel();
  // A stop does not wait out a backoff (up to 30 s after an upstream that kept failing).
  if (backoff_timer_ != nullptr) backoff_timer_->cancel();
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
  if (stopped_) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(wait);
  backoff_timer_ = &timer;
  absl::Cleanup clear = [this] { backoff_timer_ = nullptr; };
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
    if (std::exchange(relist_requested_, false)) {
      need_list = true;  // A self-check found the cache wrong (self_check.cc).
      continue;
    }
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
    std::string target = absl::StrCat(CollectionPath(), ToAbsl(kListQuery));
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
    auto page = ReadPage(res->body, &objects);
    if (!page.ok()) co_return page.status();
    if (cont.empty()) list_rv = FirstPage(page->resource_version, page->shard_info);
    cont = std::move(page->continue_token);
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

uint64_t Reflector::FirstPage(uint64_t list_rv, bool shard_info) {
  // A custom resource's list (an UnstructuredList) has no shardInfo even when the apiserver
  // shards it: its answer does not tell, and sharded reads of it stay the apiserver's.
  if (!cacher_.type().list_items_have_type_meta) cacher_.SetUpstreamSharding(shard_info);
  return list_rv;
}

absl::StatusOr<Reflector::PageMeta> Reflector::ReadPage(std::string_view body,
                                                        std::vector<ObjectPtr>* objects) const {
  const ResourceType& t = cacher_.type();
  if (protobuf()) {
    ProtoListPage page;
    if (!ParseProtoList(body, &page)) {
      return absl::DataLossError(absl::StrCat("LIST ", CollectionPath(), ": bad protobuf"));
    }
    for (std::string_view item : page.items) {
      auto obj = CachedObject::FromProtobuf(t, std::string(item));
      if (!obj.ok()) return obj.status();
      objects->push_back(*std::move(obj));
    }
    return PageMeta{page.resource_version, page.shard_info, std::string(page.continue_token)};
  }
  auto page = ParseListPage(body);
  if (!page.ok()) return page.status();
  const std::string kind = page->kind.substr(0, page->kind.size() - 4);
  for (std::string_view item : page->items) {
    // Built-in list items lack kind and apiVersion; a custom resource's (unstructured) items
    // have them already, in their sorted place.
    auto obj = CachedObject::FromJson(t, t.list_items_have_type_meta
                                             ? std::string(item)
                                             : ItemToEventForm(item, kind, page->api_version));
    if (!obj.ok()) return obj.status();
    objects->push_back(*std::move(obj));
  }
  return PageMeta{page->resource_version, page->shard_info, std::string(page->continue_token)};
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
  if (stopped_ || relist_requested_) co_return WatchEnd::kEnded;
  active_ = watch.get();
  absl::Cleanup clear = [this] { active_ = nullptr; };
  for (;;) {
    auto line = co_await watch->NextEvent(protobuf());
    if (!line.ok() && absl::IsDeadlineExceeded(line.status())) co_return IdleEnd(line.status());
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

Reflector::WatchEnd Reflector::IdleEnd(const absl::Status& status) {
  // Open, but silent past the idle timeout. Resume from the cache's RV on a new connection.
  // From an upstream that bookmarks this resource (about once a minute) that is a dead
  // watch: a half-open connection, a stuck proxy. From one that never has (no watch cache
  // there: Events), silence is only a quiet resource, the normal case on a quiet cluster.
  ++stats_.idle_timeouts;
  const bool quiet = !bookmarks_seen_ && upstream_bookmarks() != UpstreamBookmarks::kSent;
  const std::string_view error = ToStd(status.message());
  log_.Log(quiet ? Logger::Level::kInfo : Logger::Level::kWarning, "upstream watch idle, resuming",
           {{"resource", cacher_.type().GroupResource()},
            {"resourceVersion", static_cast<int64_t>(cacher_.resource_version())},
            {"bookmarked", bookmarks_seen_},
            {"error", error}});
  if (quiet) return WatchEnd::kEnded;
  return WatchEnd::kFailed;
}

Reflector::UpstreamLine Reflector::ParseProtoLine(std::string_view message) const {
  ProtoWatchEvent ev;
  if (!ParseProtoWatchEvent(message, &ev)) return {.result = LineResult::kFailed};
  if (ev.type == "ERROR") {
    if (ProtoStatusCode(ev.object.raw) != 410) return {.result = LineResult::kFailed};
    std::string_view text;  // metav1.Status's message (field 3).
    (void)FindBytesField(ev.object.raw, 3, &text);
    return {.result = LineResult::kExpired, .error = std::string(text)};
  }
  if (ev.type == "BOOKMARK") {
    std::string_view meta, rv;
    uint64_t n = 0;
    if (!FindBytesField(ev.object.raw, 1, &meta) || !FindBytesField(meta, 6, &rv) ||
        !absl::SimpleAtoi(ToAbsl(rv), &n)) {
      return {.result = LineResult::kFailed};
    }
    return {.result = LineResult::kBookmark, .rv = n};
  }
  auto obj = CachedObject::FromProtobuf(cacher_.type(), std::string(ev.object.raw));
  if (!obj.ok()) return {.result = LineResult::kFailed};
  return {.result = LineResult::kEvent, .type = EventTypeNamed(ev.type), .object = *std::move(obj)};
}

Reflector::UpstreamLine Reflector::ParseLine(std::string_view line) const {
  if (protobuf()) return ParseProtoLine(line);
  auto ev = ParseWatchLine(line);
  if (!ev.ok()) return {.result = LineResult::kFailed};
  if (ev->type == "BOOKMARK") return {.result = LineResult::kBookmark, .rv = ev->resource_version};
  if (ev->type == "ERROR") {
    if (ev->error_code != 410) return {.result = LineResult::kFailed};
    return {.result = LineResult::kExpired, .error = std::move(ev->error_message)};
  }
  auto obj = CachedObject::FromJson(cacher_.type(), std::string(ev->object));
  if (!obj.ok()) return {.result = LineResult::kFailed};
  return {
      .result = LineResult::kEvent, .type = EventTypeNamed(ev->type), .object = *std::move(obj)};
}

Reflector::LineResult Reflector::ApplyLine(std::string_view line) {
  UpstreamLine parsed = ParseLine(line);
  if (parsed.result == LineResult::kEvent) {
    cacher_.Apply(parsed.type, std::move(parsed.object));
  } else if (parsed.result == LineResult::kBookmark) {
    cacher_.Bookmark(parsed.rv);
    bookmarks_seen_ = true;
  }
  return parsed.result;
}

}  // namespace kf
