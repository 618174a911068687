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

// Takes a permit of `sem` on `ioc` and holds it until `hold` is cancelled.
void HoldUntilCancelled(asio::io_context& ioc, AsyncSemaphore& sem, asio::steady_timer& hold) {
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto p = co_await sem.Acquire();
        co_await hold.async_wait(asio::as_tuple(asio::use_awaitable));
      },
      asio::detached);
}

TEST_CASE("AsyncSemaphore gives back a permit its waiter never took") {
  AsyncSemaphore sem(1);
  {
    asio::io_context ioc;
    asio::steady_timer hold(ioc, std::chrono::hours(1));
    bool b_ran = false;
    HoldUntilCancelled(ioc, sem, hold);
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

// Tries for a permit of `sem` on `ioc`; `got` says whether it came, once `ended`.
void Try(asio::io_context& ioc, AsyncSemaphore& sem, std::chrono::steady_clock::time_point deadline,
         size_t max_waiting, bool& got, bool& ended) {
  asio::co_spawn(
      ioc,
      [&, deadline, max_waiting]() -> asio::awaitable<void> {
        auto p = co_await sem.TryAcquire(deadline, max_waiting);
        got = p.has_value();
        ended = true;
      },
      asio::detached);
}

TEST_CASE("AsyncSemaphore::TryAcquire gives up past its waiting bound and at its deadline") {
  asio::io_context ioc;
  AsyncSemaphore sem(1);
  asio::steady_timer hold(ioc, std::chrono::hours(1));
  const auto never = std::chrono::steady_clock::time_point::max();
  HoldUntilCancelled(ioc, sem, hold);
  // One waits with no deadline; a second past max_waiting=1 is refused at once.
  bool first = false, first_ended = false, second = true, second_ended = false;
  Try(ioc, sem, never, 1, first, first_ended);
  Try(ioc, sem, never, 1, second, second_ended);
  ioc.poll();
  CHECK(second_ended);
  CHECK_FALSE(second);
  CHECK_FALSE(first_ended);
  CHECK(sem.waiting() == 1);
  // A third with room to wait, but a deadline 20 ms away: refused then, and out of the line.
  bool late = true, late_ended = false;
  Try(ioc, sem, std::chrono::steady_clock::now() + std::chrono::milliseconds(20), 5, late,
      late_ended);
  ioc.poll();
  CHECK(sem.waiting() == 2);
  const auto start = std::chrono::steady_clock::now();
  while (!late_ended && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    ioc.run_one_for(std::chrono::milliseconds(10));
  }
  CHECK(late_ended);
  CHECK_FALSE(late);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  CHECK(sem.waiting() == 1);
  // The holder lets go: the first waiter (still in line) gets the permit.
  hold.cancel();
  ioc.run_for(std::chrono::milliseconds(100));
  CHECK(first_ended);
  CHECK(first);
  CHECK(sem.waiting() == 0);
}

}  // namespace
}  // namespace kf
