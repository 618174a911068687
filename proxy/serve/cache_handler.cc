#include "proxy/serve/cache_handler.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "proxy/edge/representation.h"
#include "proxy/edge/status_response.h"
#include "proxy/serve/cacheable.h"
#include "proxy/serve/consistent_read.h"
#include "proxy/serve/list_response.h"
#include "proxy/serve/watch_return.h"

namespace kf {
namespace {

// A watch past --max-watchers or --max-watchers-per-user: 429, as the apiserver refuses a
// request when overloaded. (Its own frame: the Status is not kept in every open watch's.)
asio::awaitable<void> RejectWatch(Exchange& x, WatchSlots::Refused refused) {
  // Named: a temporary bound to Reject's reference inside co_await is what GCC 12 may free twice.
  const KubeStatus busy = TooManyRequestsStatus(1);
  co_await x.Reject(busy, refused == WatchSlots::Refused::kTotal
                              ? "watch refused: --max-watchers"
                              : "watch refused: --max-watchers-per-user");
}

// A read of a cache that has not synced yet: the apiserver's answer while its own watch cache
// initializes. (Its own frame, as above; a named Status: GCC 12 frees a braced temporary inside
// co_await twice.)
asio::awaitable<void> RejectInitializing(Exchange& x, const Reflector& reflector) {
  const KubeStatus busy{429, "TooManyRequests", "storage is (re)initializing",
                        RetryAfterWhileInitializing(reflector.running_for())};
  co_await x.Reject(busy, "cache not synced yet");
}

// The entry of a cached resource for a request the cache may answer (Cacheable), waiting (up to
// kCacheStartWait) while the cache starts (its snapshots read, its resources discovered): the
// listeners serve from the first moment, and a fleet reconnecting to a restarted replica waits
// for its cache instead of going to the apiserver. Null when the request is not the cache's, or
// the cache did not start in time.
asio::awaitable<const CachedResources::Entry*> FindOnceStarted(const CachedResources& cache,
                                                               const Request& request) {
  const RequestInfo& info = request.info;
  if (!Cacheable(info, request.headers)) co_return nullptr;
  const auto until = std::chrono::steady_clock::now() + kCacheStartWait;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  // Checked again after 20 ms, doubling to 250 ms: a fleet waiting for a large snapshot wakes a
  // few times a second each, not at a fixed fast tick.
  auto pause = std::chrono::milliseconds(20);
  while (cache.starting() && cache.Covers(info) && std::chrono::steady_clock::now() < until) {
    timer.expires_after(pause);
    co_await timer.async_wait(asio::use_awaitable);
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
  co_return cache.Find(info);
}

// The cache holding the representation the apiserver would answer in (protobuf's is started by
// the first request for it, and until it has synced the apiserver answers), and whether in
// PartialObjectMetadata form. None: the apiserver's answer (YAML, pretty JSON, Table, a metadata
// form asked of the other kind of endpoint, which it refuses with 406, a custom resource's).
struct Chosen {
  Cacher* cacher = nullptr;
  Reflector* reflector = nullptr;
  bool partial_metadata = false;
};
Chosen Choose(const CachedResources& cache, const CachedResources::Entry& entry,
              const Request& request) {
  const Representation r =
      NegotiateRepresentation(request.info, request.headers, entry.proto_cacher != nullptr);
  const bool list = request.info.verb == "list";
  const bool partial = r.conversion == Conversion::kPartialMetadata ||
                       r.conversion == Conversion::kPartialMetadataList;
  if (r.conversion == Conversion::kApiserver ||
      (partial && (entry.cacher->type().list_items_have_type_meta ||
                   list != (r.conversion == Conversion::kPartialMetadataList)))) {
    return {};
  }
  switch (r.media) {
    case MediaChoice::kJson:
      return {entry.cacher.get(), entry.reflector.get(), partial};
    case MediaChoice::kProtobuf:
      return {cache.UseProtobuf(entry), entry.proto_reflector.get(), partial};
    case MediaChoice::kApiserver:
      break;
  }
  return {};
}

}  // namespace

asio::awaitable<bool> CacheHandler::Serve(Exchange& x) {
  const RequestInfo& info = x.request.info;
  const CachedResources::Entry* entry = co_await FindOnceStarted(cache_, x.request);
  if (entry == nullptr) {
    ++stats_.declined;
    co_return false;
  }
  const Chosen chosen = Choose(cache_, *entry, x.request);
  Cacher* const cacher = chosen.cacher;
  Reflector* const reflector = chosen.reflector;
  bool synced = cacher != nullptr && cacher->synced();
  // A protobuf cache still starting is waited for, unless its reflector has failed (e.g. the
  // upstream does not serve protobuf for it): then the apiserver answers at once.
  if (cacher != nullptr && !synced && cacher->encoding() == Encoding::kProtobuf) {
    synced = co_await WaitSynced(*cacher, *reflector);
  }
  // Not synced yet: answered as the apiserver answers while its own watch cache initializes
  // (once the user is known to be allowed), unless the cache cannot sync (its LIST refused).
  const bool initializing =
      !synced && reflector != nullptr && !reflector->list_refused() && BusyWhileInitializing(info);
  if (!synced && !initializing) {
    ++stats_.declined;
    if (cacher != nullptr) ReturnLater(x);  // A cache still starting: back once it has.
    co_return false;
  }
  auto filter = FilterFor(info, *cacher);
  if (filter) filter->partial_metadata = chosen.partial_metadata;
  // Selector errors are the apiserver's to word; unknown users and denied access its to refuse.
  if (!filter) {
    ++stats_.declined;
    co_return false;
  }
  // Asked again even when the identity filter knew the user: its answer may be a stale one
  // (kept for admission while the apiserver cannot be asked), which must not open the cache.
  // Unless the filter's lookup just got no answer, or was not asked for want of budget: asking
  // again would wait as long, or spend what is left of the budget on a token already refused.
  Authentication who;
  if (x.identity_unavailable || x.identity_throttled) {
    who.unavailable = x.identity_unavailable;
    who.throttled = x.identity_throttled;
  } else {
    Authentication asked = co_await authn_.Authenticate(pool_, x.request, /*allow_stale=*/false);
    who = std::move(asked);
  }
  if (who.unavailable || who.throttled) {
    co_await RefuseUnreviewed(
        x, who.unavailable ? Refusal::kTokenReviewUnavailable : Refusal::kTokenReviewThrottled);
    co_return true;
  }
  const std::optional<UserInfo>& user = who.user;
  Access access = Access::kDenied;
  if (user) access = co_await access_.Allowed(pool_, who.by, *user, info);
  if (access == Access::kUnavailable) {
    co_await RefuseUnreviewed(x, Refusal::kAccessReviewUnavailable);
    co_return true;
  }
  if (access != Access::kAllowed) {
    ++stats_.declined;
    ReturnLater(x);  // The apiserver's authorizer may say yes before the denial expires here.
    co_return false;
  }
  if (initializing) {
    ++stats_.initializing;
    co_await RejectInitializing(x, *reflector);
    co_return true;
  }
  // A cached watch holds a slot while it is open; past the bounds it is refused as the
  // apiserver refuses a request when overloaded (the exempt level is not counted).
  WatchSlots::Slot slot;
  if (info.verb == "watch" && options_.slots != nullptr && x.priority_level != "exempt") {
    const WatchSlots::Refused refused = options_.slots->Take(WatchCapKey(*user), &slot);
    if (refused != WatchSlots::Refused::kNone) {
      co_await RejectWatch(x, refused);
      co_return true;
    }
  }
  bool served = false;
  if (info.verb == "watch") {
    // Set up and left to run once this frame has ended (ServeWatch), with its slot.
    const Cacher* witness =
        cacher == entry->cacher.get()
            ? (entry->proto_started.load() ? entry->proto_cacher.get() : nullptr)
            : entry->cacher.get();
    const bool watched = co_await ServeWatch(x, *cacher, *reflector, *filter, wakeups_, stats_,
                                             options_, witness, &slot);
    served = watched;
  } else {
    const bool read = co_await ServeRead(x, *cacher, *reflector, *filter);
    served = read;
  }
  if (!served) ++stats_.declined;
  if (served && cacher->encoding() == Encoding::kProtobuf) ++stats_.protobuf;
  co_return served;
}

void CacheHandler::ReturnLater(Exchange& x) {
  if (x.request.info.verb != "watch") return;
  x.request.upstream_target =
      CappedWatchTarget(x.request.target, WatchReturnCap(access_.negative_ttl()));
  if (x.request.upstream_target) ++stats_.watches_sent_back;
}

asio::awaitable<void> CacheHandler::RefuseUnreviewed(Exchange& x, Refusal why) {
  if (routes_ != nullptr) routes_->Refused(why);
  const KubeStatus status = TooManyRequestsStatus(1);
  std::string reason = why == Refusal::kTokenReviewUnavailable
                           ? "cached read refused: TokenReview unavailable"
                       : why == Refusal::kTokenReviewThrottled
                           ? "cached read refused: TokenReview budget spent"
                           : "cached read refused: SubjectAccessReview unavailable";
  co_await x.Reject(status, std::move(reason));
}

asio::awaitable<bool> CacheHandler::ServeRead(Exchange& x, Cacher& cacher, Reflector& reflector,
                                              const WatchFilter& filter) {
  const RequestInfo& info = x.request.info;
  // A consistent read (no resourceVersion) of a quiet resource waits for the apiserver's
  // bookmark to prove the cache current; one per interval goes straight to the apiserver.
  // (Not a page after the first: its continue token is kube-fanout's to read.)
  const std::optional<std::string_view> asked = info.query.First("resourceVersion");
  if ((!asked || asked->empty()) && !info.query.First("continue") &&
      reflector.TakeConsistentPassthrough(options_.consistent_passthrough_interval)) {
    co_return false;
  }
  // Not fresh in time: refused, not passed through (consistent_read.h).
  if (info.verb == "get") {
    const Freshness fresh = co_await RequiredVersion(cacher, reflector, asked);
    if (fresh.verdict == Freshness::Verdict::kPassThrough) co_return false;
    if (fresh.verdict != Freshness::Verdict::kServe) {
      co_await RefuseUnfresh(x, fresh, stats_);
      co_return true;
    }
    const bool written = co_await WriteObject(x, cacher, stats_, filter.partial_metadata,
                                              /*miss_is_upstreams=*/asked && *asked == "0");
    co_return written;
  }
  const ListPlan plan = PlanList(info, filter, cacher.type());
  const Freshness fresh = co_await RequiredVersion(
      cacher, reflector, plan.rv ? std::optional<std::string_view>(*plan.rv) : std::nullopt);
  if (fresh.verdict == Freshness::Verdict::kPassThrough) co_return false;
  if (fresh.verdict != Freshness::Verdict::kServe) {
    co_await RefuseUnfresh(x, fresh, stats_);
    co_return true;
  }
  const ListBuilding building{.builds = list_builds_ ? &*list_builds_ : nullptr,
                              .gzip = options_.list_gzip};
  // (false: the state at that RV has left the window; the apiserver has it.)
  const bool written = co_await WriteList(x, cacher, filter, plan, fresh.rv, stats_, building);
  co_return written;
}

}  // namespace kf
