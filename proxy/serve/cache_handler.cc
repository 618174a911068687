#include "proxy/serve/cache_handler.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "common/api/status_response.h"
#include "proxy/edge/representation.h"
#include "proxy/serve/cacheable.h"
#include "proxy/serve/consistent_read.h"
#include "proxy/serve/decision.h"
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

// The entry of a cached resource, waiting (up to kCacheStartWait) while the cache starts (its
// snapshots read, its resources discovered): the listeners serve from the first moment, and a
// fleet reconnecting to a restarted replica waits for its cache instead of going to the
// apiserver. Null when the kind is not cached, or the cache did not start in time.
asio::awaitable<const CachedResources::Entry*> FindOnceStarted(const CachedResources& cache,
                                                               const RequestInfo& info) {
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

ReadVerb VerbOf(const RequestInfo& info) {
  if (info.verb == "watch") return ReadVerb::kWatch;
  return info.verb == "list" ? ReadVerb::kList : ReadVerb::kGet;
}

// What the request says of itself (decision.h), before anything is asked.
ServeFacts RequestFacts(const Exchange& x, const WatchOptions& options) {
  const RequestInfo& info = x.request.info;
  const std::optional<std::string_view> rv = info.query.First("resourceVersion");
  ServeFacts f;
  f.verb = VerbOf(info);
  f.cacheable = Cacheable(info, x.request.headers);
  f.busy_while_initializing = BusyWhileInitializing(info);
  // (Not a page after the first: its continue token is kube-fanout's to read.)
  f.consistent = f.verb != ReadVerb::kWatch && (!rv || rv->empty()) && !info.query.Has("continue");
  f.lookup_unavailable = x.identity_unavailable;
  f.lookup_throttled = x.identity_throttled;
  // No credentials, or ones the apiserver refused (the identity filter's answer): no cache is
  // looked for, started or asked about for such a client.
  if (x.unauthenticated) f.who = Who::kNoUser;
  f.watch_slots_bounded = options.slots != nullptr && x.priority_level != "exempt";
  return f;
}

Drop DropOf(Cacher::UpstreamDrop d) {
  switch (d) {
    case Cacher::UpstreamDrop::kHonours:
      return Drop::kRead;
    case Cacher::UpstreamDrop::kIgnores:
      return Drop::kIgnored;
    case Cacher::UpstreamDrop::kUnknown:
      break;
  }
  return Drop::kUnknown;
}

}  // namespace

// What Serve has learnt of one read: the facts Decide reads, and what they were learnt from.
struct CacheHandler::Read {
  ServeFacts facts;
  const CachedResources::Entry* entry = nullptr;
  Cacher* cacher = nullptr;  // The chosen cache (facts.form), and its reflector.
  Reflector* reflector = nullptr;
  std::optional<WatchFilter> filter;
  Authentication authn;
  WatchSlots::Slot slot;  // A cached watch's, held while it is open.
  ListPlan plan;
  Freshness fresh;
};

asio::awaitable<bool> CacheHandler::Serve(Exchange& x) {
  Read read{.facts = RequestFacts(x, options_)};
  // Each step learns one fact; Decide answers within kMaxLearnSteps.
  for (int steps = 0; steps <= kMaxLearnSteps; ++steps) {
    const Decision decision = Decide(read.facts);
    switch (decision.step) {
      case Step::kServe: {
        const bool served = co_await ServeFromCache(x, read);
        if (!served) Decline(x, {.pass = PassReason::kServeDeclined});
        if (served && read.cacher->encoding() == Encoding::kProtobuf) ++stats_.protobuf;
        if (served && read.facts.form.cbor) ++stats_.cbor;
        co_return served;
      }
      case Step::kPass:
        Decline(x, decision);
        co_return false;
      case Step::kRefuse:
        co_await Refuse(x, decision.refuse, read);
        co_return true;
      default:
        co_await Learn(x, decision.step, read);
    }
  }
  Decline(x, {});
  co_return false;
}

asio::awaitable<void> CacheHandler::Learn(Exchange& x, Step step, Read& read) {
  ServeFacts& f = read.facts;
  const RequestInfo& info = x.request.info;
  switch (step) {
    case Step::kFindCache: {
      const CachedResources::Entry* entry = co_await FindOnceStarted(cache_, info);
      read.entry = entry;
      f.cached = entry != nullptr;
      if (entry != nullptr) Bind(x, read);
      break;
    }
    case Step::kWaitSynced: {
      // Started by the first request for it whose user may read it; waited for unless its
      // reflector has failed (e.g. the upstream serves no protobuf for it).
      cache_.UseProtobuf(*read.entry);
      const bool synced = co_await WaitSynced(*read.cacher, *read.reflector);
      f.sync = synced ? Sync::kSynced : Sync::kWaitedOut;
      f.list_refused = read.reflector->list_refused();
      break;
    }
    case Step::kAuthenticate: {
      // Asked again even when the identity filter knew the user: its answer may be a stale
      // one (kept for admission while the apiserver cannot be asked), which must not open the
      // cache.
      Authentication asked = co_await authn_.Authenticate(pool_, x.request, /*allow_stale=*/false);
      read.authn = std::move(asked);
      f.who = WhoOf(read.authn);
      break;
    }
    case Step::kReviewAccess: {
      const Access access = co_await access_.Allowed(pool_, read.authn.by, *read.authn.user, info);
      f.access = access;
      break;
    }
    case Step::kRequireVersion: {
      const Freshness fresh = co_await RequireVersion(info, read);
      read.fresh = fresh;
      f.freshness = fresh.verdict;
      break;
    }
    default:
      LearnAtOnce(x, step, read);
  }
}

void CacheHandler::Bind(const Exchange& x, Read& read) const {
  const CachedResources::Entry& entry = *read.entry;
  const bool has_protobuf = entry.proto_cacher != nullptr;
  const Cacher::UpstreamCbor cbor = entry.cacher->upstream_cbor();
  const Drop drop = DropOf(entry.cacher->upstream_drop());
  Representation r = NegotiateRepresentation(x.request.info, x.request.headers, has_protobuf,
                                             /*allow_conversion=*/true,
                                             cbor != Cacher::UpstreamCbor::kRefuses, drop);
  ServeFacts& f = read.facts;
  if (r.media == MediaChoice::kCbor && cbor != Cacher::UpstreamCbor::kServes) {
    // Whether the upstream serves CBOR is asked on the first request for it by a user allowed
    // to read the kind (kAskCbor); until answered, such requests are the apiserver's.
    f.ask_cbor = true;
    r = NegotiateRepresentation(x.request.info, x.request.headers, has_protobuf, true, false, drop);
  }
  // The same for drop= (kAskDrop).
  f.ask_drop = r.asks_drop;
  f.form = ChooseForm(f.verb, r, has_protobuf, entry.cacher->type().list_items_have_type_meta);
  switch (f.form.cache) {
    case Form::Cache::kJson:
      read.cacher = entry.cacher.get();
      read.reflector = entry.reflector.get();
      break;
    case Form::Cache::kProtobuf:  // Started by the first allowed request for it (kWaitSynced).
      read.cacher = entry.proto_cacher.get();
      read.reflector = entry.proto_reflector.get();
      break;
    case Form::Cache::kNone:
      return;
  }
  f.sync = read.cacher->synced() ? Sync::kSynced : Sync::kSyncing;
  f.list_refused = read.reflector->list_refused();
}

void CacheHandler::LearnAtOnce(const Exchange& x, Step step, Read& read) {
  ServeFacts& f = read.facts;
  switch (step) {
    case Step::kSelect:
      read.filter = FilterFor(x.request.info, *read.cacher);
      if (read.filter) {
        read.filter->partial_metadata = f.form.partial_metadata;
        read.filter->cbor = f.form.cbor;
        read.filter->drop_managed_fields = x.drop_managed_fields || f.form.drop_managed_fields;
        read.filter->cbor_bytes_map = read.cacher->type().CborBytesMap();
      }
      f.selects = read.filter.has_value();
      break;
    case Step::kAskCbor:
      read.entry->reflector->AskCbor();
      f.ask_cbor = false;
      break;
    case Step::kAskDrop:
      read.entry->reflector->AskDrop();
      f.ask_drop = false;
      break;
    case Step::kTakeWatchSlot:
      f.slot = options_.slots->Take(WatchCapKey(*read.authn.user), &read.slot);
      break;
    case Step::kTakeConsistentTurn:
      // A consistent read of a quiet resource waits for the apiserver's bookmark to prove the
      // cache current; one per interval goes straight to the apiserver. A GET, cheaper for the
      // apiserver than a proof shared by few, also while they come slower than their rate.
      f.consistent_turn =
          read.reflector->TakeConsistentPassthrough(options_.consistent_passthrough_interval) ||
          (f.verb == ReadVerb::kGet &&
           read.reflector->TakeConsistentGetPassthrough(options_.consistent_get_passthrough_qps));
      break;
    default:
      break;
  }
}

asio::awaitable<Freshness> CacheHandler::RequireVersion(const RequestInfo& info, Read& read) {
  std::optional<std::string_view> rv = info.query.First("resourceVersion");
  if (read.facts.verb == ReadVerb::kList) {
    read.plan = PlanList(info, *read.filter, read.cacher->type());
    rv = read.plan.rv ? std::optional<std::string_view>(*read.plan.rv) : std::nullopt;
  }
  const Freshness fresh = co_await RequiredVersion(*read.cacher, *read.reflector, rv);
  co_return fresh;
}

void CacheHandler::Decline(Exchange& x, const Decision& decision) {
  ++stats_.declined;
  ++stats_.passed[static_cast<size_t>(decision.pass)];
  // A consistent read's turn upstream (one per interval, and GETs under their rate, per
  // resource) is bounded by those budgets, not by the client's: it was admitted as a cached
  // read and costs the apiserver no more than the proof that would have served it, so it does
  // not pay the passthrough price (a DaemonSet's lookups are not refused for kube-fanout's
  // choice of where to answer them).
  if (decision.pass == PassReason::kConsistentTurn) x.admitted_as_cached_read = false;
  // A declined watch that may be the cache's later: sent upstream to end by then.
  if (!decision.send_back) return;
  x.request.upstream_target =
      CappedWatchTarget(x.request.target, WatchReturnCap(access_.negative_ttl()));
  if (x.request.upstream_target) ++stats_.watches_sent_back;
}

asio::awaitable<void> CacheHandler::Refuse(Exchange& x, RefuseReason why, const Read& read) {
  switch (why) {
    case RefuseReason::kTokenReviewUnavailable:
      co_await RefuseUnreviewed(x, Refusal::kTokenReviewUnavailable);
      break;
    case RefuseReason::kTokenReviewThrottled:
      co_await RefuseUnreviewed(x, Refusal::kTokenReviewThrottled);
      break;
    case RefuseReason::kAccessReviewUnavailable:
      co_await RefuseUnreviewed(x, Refusal::kAccessReviewUnavailable);
      break;
    case RefuseReason::kInitializing:
      ++stats_.initializing;
      co_await RejectInitializing(x, *read.reflector);
      break;
    case RefuseReason::kWatchersTotal:
      co_await RejectWatch(x, WatchSlots::Refused::kTotal);
      break;
    case RefuseReason::kWatchersPerUser:
      co_await RejectWatch(x, WatchSlots::Refused::kPerUser);
      break;
    case RefuseReason::kTooLargeResourceVersion:
    case RefuseReason::kUnproven:
    case RefuseReason::kNone:
      co_await RefuseUnfresh(x, read.fresh, stats_);
      break;
  }
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

asio::awaitable<bool> CacheHandler::ServeFromCache(Exchange& x, Read& read) {
  Cacher& cacher = *read.cacher;
  if (read.facts.verb == ReadVerb::kWatch) {
    // Set up and left to run once this frame has ended (ServeWatch), with its slot.
    const CachedResources::Entry& entry = *read.entry;
    const Cacher* witness = &cacher == entry.cacher.get()
                                ? (entry.proto_started.load() ? entry.proto_cacher.get() : nullptr)
                                : entry.cacher.get();
    const bool watched = co_await ServeWatch(x, cacher, *read.reflector, *read.filter, wakeups_,
                                             stats_, options_, witness, &read.slot);
    co_return watched;
  }
  if (read.facts.verb == ReadVerb::kGet) {
    const std::optional<std::string_view> asked = x.request.info.query.First("resourceVersion");
    const bool written = co_await WriteObject(x, cacher, stats_, &*read.filter,
                                              /*miss_is_upstreams=*/asked && *asked == "0");
    co_return written;
  }
  const ListBuilding building{.builds = list_builds_ ? &*list_builds_ : nullptr,
                              .gzip = options_.list_gzip};
  // (false: the state at that RV has left the window; the apiserver has it.)
  const bool written =
      co_await WriteList(x, cacher, *read.filter, read.plan, read.fresh.rv, stats_, building);
  co_return written;
}

}  // namespace kf
