#include "proxy/serve/watch_history.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

namespace kf {
namespace {

namespace asio = boost::asio;

// The reflector's answer, handed to the waiting request's thread; the timer bounds the wait.
struct BackfillWait {
  explicit BackfillWait(const asio::any_io_executor& e) : timer(e) {}
  asio::steady_timer timer;
  std::optional<BackfillResult> result;
};

asio::awaitable<std::optional<BackfillResult>> AwaitBackfill(Reflector& reflector, uint64_t rv) {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  auto wait = std::make_shared<BackfillWait>(executor);
  wait->timer.expires_after(kBackfillWait);
  reflector.Backfill(rv, [wait, executor](BackfillResult result) {
    asio::post(executor, [wait, result = std::move(result)]() mutable {
      wait->result = std::move(result);
      wait->timer.cancel();
    });
  });
  co_await wait->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return wait->result;
}

}  // namespace

asio::awaitable<Registered> StartBeforeWindow(Cacher& cacher, Reflector& reflector,
                                              const Cacher* witness, const WatchFilter& filter,
                                              uint64_t rv, absl::Status expired,
                                              std::function<Registered(uint64_t)> start,
                                              CacheServeStats& stats) {
  // The other cache shows whether anything this watch would see happened in between.
  const uint64_t window_start = cacher.window_start_rv();
  if (witness != nullptr && window_start > rv && witness->NothingFor(filter, rv, window_start)) {
    Registered vouched = start(window_start);
    if (vouched.ok()) {
      ++stats.watches_vouched;
      co_return vouched;
    }
  }
  // Nothing to fill: a fill that ended since the first try may have brought the window back
  // to `rv` (else this is the 410 again).
  if (!cacher.HistoryNeeded(rv)) co_return start(rv);
  const std::optional<BackfillResult> filled = co_await AwaitBackfill(reflector, rv);
  if (filled && filled->kind == BackfillResult::Kind::kTooOld && !filled->message.empty()) {
    // The upstream's own words for it.
    co_return absl::OutOfRangeError(filled->message);
  }
  // Not needed any more: another fill brought the window back to `rv` meanwhile.
  if (!filled || (filled->kind != BackfillResult::Kind::kFilled &&
                  filled->kind != BackfillResult::Kind::kNotNeeded)) {
    co_return expired;
  }
  co_return start(rv);
}

}  // namespace kf
