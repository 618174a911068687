#include "common/async_semaphore.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <vector>

namespace kf {
namespace {

namespace asio = boost::asio;

TEST_CASE("AsyncSemaphore lets N hold at once and the rest in arrival order") {
  asio::io_context ioc;
  AsyncSemaphore sem(2);
  int active = 0, peak = 0;
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) {
    asio::co_spawn(
        ioc,
        [&, i]() -> asio::awaitable<void> {
          auto permit = co_await sem.Acquire();
          order.push_back(i);
          peak = std::max(peak, ++active);
          asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(2));
          co_await t.async_wait(asio::use_awaitable);
          --active;
        },
        asio::detached);
  }
  ioc.run();
  CHECK(peak == 2);
  CHECK(active == 0);
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(sem.waiting() == 0);
}

TEST_CASE("AsyncSemaphore gives back a permit its waiter never took") {
  AsyncSemaphore sem(1);
  {
    asio::io_context ioc;
    asio::steady_timer hold(ioc, std::chrono::hours(1));
    bool b_ran = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          auto p = co_await sem.Acquire();
          co_await hold.async_wait(asio::as_tuple(asio::use_awaitable));
        },
        asio::detached);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          auto p = co_await sem.Acquire();
          b_ran = true;
        },
        asio::detached);
    ioc.poll();
    REQUIRE(sem.waiting() == 1);
    // The holder lets go: the waiter is handed the permit, but its thread never runs again.
    hold.cancel();
    ioc.poll_one();
    CHECK_FALSE(b_ran);
  }  // The waiter's coroutine is destroyed here, granted and not taken.
  asio::io_context ioc;
  bool got = false;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto p = co_await sem.Acquire();
        got = true;
      },
      asio::detached);
  ioc.poll();
  CHECK(got);
  CHECK(sem.waiting() == 0);
}

}  // namespace
}  // namespace kf
