#include "ratelimit/watch_slots.h"

#include <catch2/catch.hpp>
#include <optional>
#include <vector>

namespace kf {
namespace {

TEST_CASE("WatchSlots refuses a watch past the total and gives the slot back when it ends") {
  WatchSlots slots(/*max_total=*/2, /*max_per_user=*/0);
  std::vector<WatchSlots::Slot> held(2);
  CHECK(slots.Take("a", &held[0]) == WatchSlots::Refused::kNone);
  CHECK(slots.Take("b", &held[1]) == WatchSlots::Refused::kNone);
  CHECK(slots.open() == 2);
  WatchSlots::Slot third;
  CHECK(slots.Take("c", &third) == WatchSlots::Refused::kTotal);
  CHECK(slots.open() == 2);  // The refused one holds nothing.
  CHECK(slots.refused(WatchSlots::Refused::kTotal) == 1);
  held.pop_back();  // A watch ends.
  CHECK(slots.open() == 1);
  CHECK(slots.Take("c", &third) == WatchSlots::Refused::kNone);
  CHECK(slots.open() == 2);
  CHECK(slots.refused(WatchSlots::Refused::kPerUser) == 0);
}

TEST_CASE("WatchSlots bounds each user on its own") {
  WatchSlots slots(/*max_total=*/0, /*max_per_user=*/2);
  std::vector<WatchSlots::Slot> a(3), b(1);
  CHECK(slots.Take("a", &a[0]) == WatchSlots::Refused::kNone);
  CHECK(slots.Take("a", &a[1]) == WatchSlots::Refused::kNone);
  CHECK(slots.Take("a", &a[2]) == WatchSlots::Refused::kPerUser);
  CHECK(slots.Take("b", &b[0]) == WatchSlots::Refused::kNone);  // Another user's are its own.
  CHECK(slots.open() == 3);
  CHECK(slots.refused(WatchSlots::Refused::kPerUser) == 1);
  {
    WatchSlots::Slot moved(std::move(a[0]));  // Moving a slot does not release it twice.
    CHECK(slots.open() == 3);
  }
  CHECK(slots.open() == 2);
  CHECK(slots.Take("a", &a[2]) == WatchSlots::Refused::kNone);
  CHECK(slots.refused(WatchSlots::Refused::kTotal) == 0);
}

TEST_CASE("WatchSlots with no bounds counts what is open") {
  WatchSlots slots(0, 0);
  std::vector<WatchSlots::Slot> held(1000);
  for (auto& s : held) CHECK(slots.Take("a", &s) == WatchSlots::Refused::kNone);
  CHECK(slots.open() == 1000);
  held.clear();
  CHECK(slots.open() == 0);
}

}  // namespace
}  // namespace kf
