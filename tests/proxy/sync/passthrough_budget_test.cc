#include "proxy/sync/passthrough_budget.h"

#include <catch2/catch.hpp>
#include <cstdint>

namespace kf {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStart = 1'000'000 * kMs;  // Any steady-clock time.

int TakeAt(PassthroughBudget& budget, uint32_t per_second, int64_t now, int tries) {
  int taken = 0;
  for (int i = 0; i < tries; ++i) taken += budget.Take(per_second, now);
  return taken;
}

TEST_CASE("PassthroughBudget lets a second's worth of reads through at once, then its rate",
          "[sync][passthrough_budget]") {
  PassthroughBudget budget;
  CHECK(TakeAt(budget, 50, kStart, 80) == 50);
  CHECK(TakeAt(budget, 50, kStart + 10 * kMs, 5) == 0);  // Half a read earned.
  CHECK(TakeAt(budget, 50, kStart + 20 * kMs, 5) == 1);
  CHECK(TakeAt(budget, 50, kStart + 220 * kMs, 20) == 10);
  // Idle for long: full again, never more than the burst.
  CHECK(TakeAt(budget, 50, kStart + 60'000 * kMs, 80) == 50);
}

TEST_CASE("PassthroughBudget at rate 0 lets no read through", "[sync][passthrough_budget]") {
  PassthroughBudget budget;
  CHECK(TakeAt(budget, 0, kStart, 10) == 0);
  CHECK(TakeAt(budget, 1, kStart, 10) == 1);
  CHECK(TakeAt(budget, 1, kStart + 999 * kMs, 1) == 0);
  CHECK(TakeAt(budget, 1, kStart + 1000 * kMs, 1) == 1);
}

TEST_CASE("PassthroughBudget paces a steady stream of reads at its rate",
          "[sync][passthrough_budget]") {
  PassthroughBudget budget;
  // 100 reads a second for 10 s against 20 a second: the burst, then 20 a second.
  int taken = 0;
  for (int i = 0; i < 1000; ++i) taken += budget.Take(20, kStart + i * 10 * kMs);
  CHECK(taken >= 20 + 20 * 10 - 1);
  CHECK(taken <= 20 + 20 * 10 + 1);
}

}  // namespace
}  // namespace kf
