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

TEST_CASE("EventRing puts history before a window that begins at a list, in order") {
  EventRing ring(EventRingLimits{});
  ring.Reset(20);
  const auto t0 = Clock::time_point{};
  ring.Push(Ev(25, t0), t0);
  CHECK(ring.Since(12).status().code() == absl::StatusCode::kOutOfRange);
  REQUIRE(ring.InsertHistory(10, {Ev(12, t0), Ev(15, t0), Ev(20, t0)}).ok());
  CHECK(ring.start_rv() == 10);
  CHECK(ring.oldest_resumable_rv() == 10);
  CHECK(ring.history_through_rv() == 20);
  auto since = ring.Since(11);
  REQUIRE(since.ok());
  std::vector<uint64_t> rvs;
  for (const EventPtr& e : *since) rvs.push_back(e->resource_version());
  CHECK(rvs == std::vector<uint64_t>{12, 15, 20, 25});
  // Older still: before the history just inserted.
  REQUIRE(ring.InsertHistory(5, {Ev(8, t0)}).ok());
  CHECK(ring.Since(5)->size() == 5);
  CHECK(ring.history_through_rv() == 20);
  ring.Reset(30);
  CHECK(ring.history_through_rv() == 0);
}

TEST_CASE("EventRing refuses history out of order, past its start, or over its bounds") {
  EventRingLimits limits;
  limits.max_events = 3;
  EventRing ring(limits);
  ring.Reset(20);
  const auto t0 = Clock::time_point{};
  ring.Push(Ev(25, t0), t0);
  CHECK(ring.InsertHistory(10, {Ev(15, t0), Ev(12, t0)}).code() ==
        absl::StatusCode::kInvalidArgument);
  // The event at the window's start is the list's last; one after it is the window's own.
  CHECK(ring.InsertHistory(10, {Ev(21, t0)}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(ring.InsertHistory(20, {}).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(ring.InsertHistory(10, {Ev(11, t0), Ev(12, t0), Ev(13, t0)}).code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(ring.size() == 1);  // Nothing inserted.
  CHECK(ring.start_rv() == 20);
  EventRingLimits bytes;
  bytes.max_bytes = Ev(25, t0)->size_bytes() * 2;
  EventRing small(bytes);
  small.Reset(20);
  small.Push(Ev(25, t0), t0);
  CHECK(small.InsertHistory(10, {Ev(11, t0), Ev(12, t0)}).code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(small.InsertHistory(10, {Ev(12, t0)}).ok());
}

TEST_CASE("EventRing takes no history once it evicted events") {
  EventRing ring(EventRingLimits{.max_events = 1, .min_history = std::chrono::seconds(0)});
  ring.Reset(20);
  const auto t0 = Clock::time_point{};
  ring.Push(Ev(25, t0), t0);
  ring.Push(Ev(26, t0), t0);
  CHECK(ring.InsertHistory(10, {}).code() == absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kf
