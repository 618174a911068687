#include "proxy/serve/consistent_read.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "absl/strings/str_cat.h"
#include "common/api/go_strconv.h"
#include "common/await_callback.h"
#include "common/strings.h"

namespace kf {
namespace {

namespace asio = boost::asio;

// Waits (bounded) until the cache's RV reaches `rv`.
asio::awaitable<bool> CatchUp(Cacher& cacher, uint64_t rv, std::chrono::milliseconds timeout) {
  if (cacher.resource_version() >= rv) co_return true;
  auto exec = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(exec);
  auto done = std::make_shared<bool>(false);
  timer->expires_after(timeout);
  cacher.WaitForVersion(rv, [exec, weak = std::weak_ptr<asio::steady_timer>(timer), done] {
    asio::post(exec, [weak, done] {
      *done = true;
      if (auto t = weak.lock()) t->cancel();
    });
  });
  if (!*done) co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  co_return cacher.resource_version() >= rv;
}

}  // namespace

asio::awaitable<Freshness> RequiredVersion(Cacher& cacher, Reflector& reflector,
                                           std::optional<std::string_view> rv) {
  using Verdict = Freshness::Verdict;
  if (rv && *rv == "0") co_return Freshness{};
  // A resource the upstream sends no bookmarks for cannot be proven current: what the cache
  // has not seen is the upstream's to answer (as the apiserver answers it from etcd).
  const auto unprovable = [&reflector] {
    return reflector.upstream_bookmarks() == UpstreamBookmarks::kNone;
  };
  uint64_t need = 0;
  const bool consistent = !rv || rv->empty();
  if (!consistent) {
    need = ParseGoUint(*rv).value_or(0);  // Cacheable: it parses.
  } else {
    if (unprovable()) co_return Freshness{Verdict::kPassThrough};
    auto probed = co_await AwaitCallback<std::optional<uint64_t>>(
        [&reflector](std::function<void(std::optional<uint64_t>)> done) {
          reflector.ProbeUpstreamVersion(std::move(done));
        },
        std::chrono::milliseconds(10000));
    // No answer in time: refused only where the upstream has shown it can prove progress
    // (below); a chain of tiers not yet told apart waits out each tier's wait in turn.
    if (!probed) {
      co_return Freshness{reflector.upstream_bookmarks() == UpstreamBookmarks::kSent
                              ? Verdict::kUnproven
                              : Verdict::kPassThrough};
    }
    if (!*probed) co_return Freshness{Verdict::kPassThrough};
    need = **probed;
  }
  if (cacher.resource_version() < need) {
    if (unprovable()) co_return Freshness{Verdict::kPassThrough};
    reflector.RequestProgress(need, kFreshnessWait, /*upstream_has_it=*/consistent);
  }
  const bool caught_up = co_await CatchUp(cacher, need, kFreshnessWait);
  if (!caught_up) {
    // Refused only where the upstream has shown it can prove progress: otherwise (not yet told
    // apart, or just found to send no bookmarks) the wait proved nothing about kube-fanout.
    if (reflector.upstream_bookmarks() != UpstreamBookmarks::kSent) {
      co_return Freshness{Verdict::kPassThrough};
    }
    co_return Freshness{consistent ? Verdict::kUnproven : Verdict::kTooLarge, need,
                        cacher.resource_version()};
  }
  co_return Freshness{Verdict::kServe, need};
}

KubeStatus UnfreshStatus(const Freshness& freshness) {
  if (freshness.verdict != Freshness::Verdict::kTooLarge) return TooManyRequestsStatus(1);
  KubeStatus status{504, "Timeout",
                    absl::StrCat("Timeout: Too large resource version: ", freshness.rv,
                                 ", current: ", freshness.current),
                    1};
  status.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  return status;
}

asio::awaitable<void> RefuseUnfresh(Exchange& x, const Freshness& freshness,
                                    CacheServeStats& stats) {
  const bool too_large = freshness.verdict == Freshness::Verdict::kTooLarge;
  ++(too_large ? stats.unfresh_too_large : stats.unfresh_unproven);
  const KubeStatus status = UnfreshStatus(freshness);
  co_await x.Reject(status, too_large ? "cached read refused: resourceVersion not reached in time"
                                      : "cached read refused: cache not proven current in time");
}

asio::awaitable<bool> WaitSynced(Cacher& cacher, const Reflector& reflector,
                                 std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  constexpr auto kSlice = std::chrono::milliseconds(500);
  while (!cacher.synced() && reflector.stats().errors.load() == 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    // A cache's RV moves off 0 with its first LIST.
    const bool listed = co_await CatchUp(cacher, 1, std::min(left, kSlice));
    if (listed) break;
  }
  co_return cacher.synced();
}

}  // namespace kf
