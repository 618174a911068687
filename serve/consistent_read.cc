#include "serve/consistent_read.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "absl/strings/numbers.h"
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

asio::awaitable<std::optional<uint64_t>> RequiredVersion(Cacher& cacher, Reflector& reflector,
                                                         std::optional<std::string_view> rv) {
  if (rv && *rv == "0") co_return 0;
  uint64_t need = 0;
  if (rv && !rv->empty()) {
    (void)absl::SimpleAtoi(ToAbsl(*rv), &need);
  } else {
    auto probed = co_await AwaitCallback<std::optional<uint64_t>>(
        [&reflector](std::function<void(std::optional<uint64_t>)> done) {
          reflector.ProbeUpstreamVersion(std::move(done));
        },
        std::chrono::milliseconds(10000));
    if (!probed || !*probed) co_return std::nullopt;
    need = **probed;
  }
  if (cacher.resource_version() < need) reflector.RequestProgress(need, kFreshnessWait);
  const bool caught_up = co_await CatchUp(cacher, need, kFreshnessWait);
  if (!caught_up) co_return std::nullopt;
  co_return need;
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
