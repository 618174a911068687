// The reflector's fills of watch history (Reflector::Backfill): a cache that began at an upstream
// LIST at X has no events before X, but a client resuming a watch from r < X after a restart
// without a snapshot (or a relist) would get them from the apiserver, whose window still holds
// r. One short upstream watch from r brings the events (r, X], put before the window as history
// (Cacher::InsertHistory); the LIST at X has them already, so the cache's state does not change.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proxy/sync/reflector.h"

namespace kf {
namespace {

// The longest silence of a fill's watch: the apiserver sends its bookmark about a second in
// (timeoutSeconds=3), and ends the watch at three.
constexpr auto kBackfillIdle = std::chrono::seconds(5);

std::string_view KindName(BackfillResult::Kind kind) {
  switch (kind) {
    case BackfillResult::Kind::kFilled:
      return "filled";
    case BackfillResult::Kind::kTooOld:
      return "too_old";
    case BackfillResult::Kind::kNotNeeded:
      return "not_needed";
    case BackfillResult::Kind::kFailed:
      break;
  }
  return "failed";
}

// Whether an update (or deletion) is some object's first event here: the state before it is
// then not in these events.
bool UpdatesFirst(const std::vector<Cacher::HistoryEvent>& events) {
  absl::flat_hash_set<std::string_view> seen;
  for (const Cacher::HistoryEvent& e : events) {
    if (seen.insert(e.object->key()).second && e.type != EventType::kAdded) return true;
  }
  return false;
}

}  // namespace

void Reflector::Backfill(uint64_t rv, std::function<void(BackfillResult)> done) {
  asio::post(exec_, [this, rv, done = std::move(done)]() mutable {
    if (stopped_) {
      done(BackfillResult{});
      return;
    }
    backfill_waiting_.emplace_back(rv, std::move(done));
    if (!backfill_running_) {
      backfill_running_ = true;
      asio::co_spawn(exec_, BackfillLoop(), asio::detached);
    }
  });
}

asio::awaitable<void> Reflector::BackfillLoop() {
  while (!backfill_waiting_.empty()) {
    uint64_t from = backfill_waiting_.front().first;
    for (const auto& [rv, done] : backfill_waiting_) from = std::min(from, rv);
    BackfillResult result;
    const std::optional<uint64_t> through = stopped_ ? std::nullopt : cacher_.HistoryNeeded(from);
    if (through) {
      result = co_await BackfillOnce(from, *through);
      std::atomic<uint64_t>& count =
          result.kind == BackfillResult::Kind::kFilled   ? stats_.backfills_filled
          : result.kind == BackfillResult::Kind::kTooOld ? stats_.backfills_too_old
                                                         : stats_.backfills_failed;
      ++count;
    } else if (!stopped_) {
      result.kind = BackfillResult::Kind::kNotNeeded;
    }
    // This fill answers every ask from its RV on, those made while it ran too; older ones wait
    // for the next.
    std::vector<std::function<void(BackfillResult)>> answered;
    std::erase_if(backfill_waiting_, [&](auto& ask) {
      if (ask.first < from) return false;
      answered.push_back(std::move(ask.second));
      return true;
    });
    for (auto& done : answered) done(result);
  }
  backfill_running_ = false;
}

asio::awaitable<BackfillResult> Reflector::BackfillOnce(uint64_t after_rv, uint64_t through_rv) {
  const std::string target =
      absl::StrCat(CollectionPath(), "?allowWatchBookmarks=true&resourceVersion=", after_rv,
                   "&timeoutSeconds=3&watch=true");
  BackfillResult result;
  int64_t filled = 0;
  absl::Cleanup log = [&] {
    log_.Info("watch history filled in from the upstream",
              {{"resource", cacher_.type().GroupResource()},
               {"encoding", protobuf() ? "protobuf" : "json"},
               {"from", static_cast<int64_t>(after_rv)},
               {"through", static_cast<int64_t>(through_rv)},
               {"result", KindName(result.kind)},
               {"events", filled}});
  };
  auto opened =
      co_await UpstreamWatch::Open(pool_, target, credentials_(), kBackfillIdle, Accept());
  if (!opened.ok()) co_return result;
  if (auto* res = std::get_if<UpstreamResponse>(&*opened)) {
    if (res->status == 410) result.kind = BackfillResult::Kind::kTooOld;
    co_return result;
  }
  std::unique_ptr<UpstreamWatch> watch = std::move(std::get<0>(*opened));
  if (stopped_) co_return result;  // Stopped while it opened (see WatchOnce).
  backfill_active_ = watch.get();
  absl::Cleanup clear = [this] { backfill_active_ = nullptr; };
  const EventRingLimits& limits = cacher_.window_limits();
  std::vector<Cacher::HistoryEvent> events;
  size_t bytes = 0;
  bool reached = false;  // An event or bookmark at or past `through_rv` came.
  while (!reached) {
    auto line = co_await watch->NextEvent(protobuf());
    if (!line.ok()) co_return result;  // Ended (or failed) short of the window.
    if (line->empty()) continue;
    UpstreamLine parsed = ParseLine(*line);
    if (parsed.result == LineResult::kExpired) {
      result = {.kind = BackfillResult::Kind::kTooOld, .message = std::move(parsed.error)};
      co_return result;
    }
    if (parsed.result == LineResult::kFailed) co_return result;
    if (parsed.result == LineResult::kBookmark) {
      reached = parsed.rv >= through_rv;
      continue;
    }
    const uint64_t rv = parsed.object->resource_version();
    reached = rv >= through_rv;
    if (rv > through_rv) break;
    bytes += parsed.object->json().size();
    if (bytes > limits.max_bytes || events.size() >= limits.max_events) co_return result;
    events.push_back({parsed.type, std::move(parsed.object)});
  }
  const auto n = static_cast<int64_t>(events.size());
  if (!co_await KeepHistory(after_rv, through_rv, std::move(events))) co_return result;
  result.kind = BackfillResult::Kind::kFilled;
  filled = n;
  co_return result;
}

asio::awaitable<bool> Reflector::KeepHistory(uint64_t after_rv, uint64_t through_rv,
                                             std::vector<Cacher::HistoryEvent> events) {
  // The state before them, for watchers whose selection an update may change: without it they
  // get the 410 (Cacher::InsertHistory).
  std::optional<std::vector<ObjectPtr>> before;
  if (UpdatesFirst(events)) {
    auto listed = co_await ListAt(after_rv);
    if (listed.ok()) before = *std::move(listed);
  }
  co_return cacher_
      .InsertHistory(after_rv, through_rv, std::move(events), before ? &*before : nullptr)
      .ok();
}

asio::awaitable<absl::StatusOr<std::vector<ObjectPtr>>> Reflector::ListAt(uint64_t rv) {
  std::vector<ObjectPtr> objects;
  std::string cont;
  do {
    const std::string target = ExactListTarget(rv, cont);
    auto res = co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                                     kBackfillIdle, Accept());
    if (!res.ok()) co_return res.status();
    if (res->status != 200) {
      co_return absl::UnavailableError(absl::StrCat("LIST ", target, ": HTTP ", res->status));
    }
    auto page = ReadPage(res->body, &objects);
    if (!page.ok()) co_return page.status();
    if (page->resource_version != rv) co_return absl::DataLossError("listed at another RV");
    cont = std::move(page->continue_token);
  } while (!cont.empty());
  co_return objects;
}

}  // namespace kf
