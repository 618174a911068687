#include "cache/event_ring.h"

#include <catch2/catch.hpp>

#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Pod;
using Clock = std::chrono::steady_clock;

EventPtr Ev(uint64_t rv, Clock::time_point at) {
  return std::make_shared<const WatchEvent>(EventType::kAdded,
                                            Pod("n", "p" + std::to_string(rv), rv), nullptr, at);
}

TEST_CASE("EventRing returns the events after a resourceVersion, oldest first") {
  EventRing ring(EventRingLimits{});
  ring.Reset(10);
  const auto t0 = Clock::time_point{};
  for (uint64_t rv : {11, 15, 20}) ring.Push(Ev(rv, t0), t0);
  auto since = ring.Since(11);
  REQUIRE(since.ok());
  REQUIRE(since->size() == 2);
  CHECK((*since)[0]->resource_version() == 15);
  CHECK((*since)[1]->resource_version() == 20);
  CHECK(ring.Since(20)->empty());
  CHECK(ring.Since(13)->size() == 2);  // RVs between events resume at the next one.
}

TEST_CASE("EventRing answers Expired for a resourceVersion older than its oldest event") {
  EventRingLimits limits;
  limits.max_events = 2;
  limits.min_history = std::chrono::seconds(0);
  EventRing ring(limits);
  ring.Reset(10);
  const auto t0 = Clock::time_point{};
  for (uint64_t rv : {11, 15, 20}) ring.Push(Ev(rv, t0), t0);
  CHECK_FALSE(ring.complete());
  auto old = ring.Since(12);
  CHECK(old.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(old.status().message() == "too old resource version: 12 (14)");
  CHECK(ring.Since(14).ok());
}

TEST_CASE("EventRing keeps the minimum history even past its event count") {
  EventRingLimits limits;
  limits.max_events = 1;
  limits.min_history = std::chrono::seconds(75);
  EventRing ring(limits);
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  ring.Push(Ev(1, t0), t0);
  ring.Push(Ev(2, t0 + std::chrono::seconds(10)), t0 + std::chrono::seconds(10));
  CHECK(ring.size() == 2);  // The first is only 10 s old.
  ring.Push(Ev(3, t0 + std::chrono::seconds(80)), t0 + std::chrono::seconds(80));
  CHECK(ring.size() == 2);  // Now it is 80 s old: evicted.
}

TEST_CASE("EventRing is bounded in bytes whatever the history") {
  EventRingLimits limits;
  limits.max_bytes = 2000;
  EventRing ring(limits);
  const auto t0 = Clock::time_point{};
  for (uint64_t rv = 1; rv <= 50; ++rv) ring.Push(Ev(rv, t0), t0);
  CHECK(ring.bytes() <= 2000);
  CHECK(ring.size() < 50);
}

}  // namespace
}  // namespace kf
