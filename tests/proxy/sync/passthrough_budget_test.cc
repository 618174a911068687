#include "proxy/sync/passthrough_budget.h"

#include <catch2/catch.hpp>
#include <cstdint>

namespace kf {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStart = 1'000'000 * kMs;  // Any steady-clock time.

// Reads every `gap_ms` from `from` for `count` reads: how many passed.
int Stream(PassthroughBudget& budget, uint32_t per_second, int64_t from, int64_t gap_ms,
           int count) {
  int passed = 0;
  for (int i = 0; i < count; ++i) passed += budget.Take(per_second, from + i * gap_ms * kMs);
  return passed;
}

TEST_CASE("PassthroughBudget passes every read that comes slower than its rate",
          "[sync][passthrough_budget]") {
  PassthroughBudget budget;
  CHECK(Stream(budget, 50, kStart, 25, 400) == 400);  // 40 a second for 10 s.
}

TEST_CASE("PassthroughBudget passes a second's worth of a burst, then none while it lasts",
          "[sync][passthrough_budget]") {
  PassthroughBudget budget;
  CHECK(Stream(budget, 50, kStart, 0, 80) == 50);
  // 100 a second for 5 s, right after: every read counts, so none passes.
  CHECK(Stream(budget, 50, kStart + 10 * kMs, 10, 500) == 0);
  // A second after it ends the reads pass again.
  CHECK(Stream(budget, 50, kStart + 6'100 * kMs, 100, 10) == 10);
}

TEST_CASE("PassthroughBudget at rate 0 passes no read", "[sync][passthrough_budget]") {
  PassthroughBudget budget;
  CHECK(Stream(budget, 0, kStart, 100, 10) == 0);
  CHECK(Stream(budget, 1, kStart, 0, 10) == 1);
  CHECK(Stream(budget, 1, kStart + 3'000 * kMs, 0, 1) == 1);
}

}  // namespace
}  // namespace kf
