#include "ratelimit/event_filter.h"

#include <catch2/catch.hpp>

namespace kf::ratelimit {
namespace {

using namespace std::chrono_literals;

std::string CoreEvent(const std::string& component, const std::string& pod) {
  return R"({"kind":"Event","apiVersion":"v1","metadata":{"generateName":"x."},)"
         R"("involvedObject":{"kind":"Pod","namespace":"ns","name":")" +
         pod +
         R"(","uid":"u1","apiVersion":"v1"},"reason":"BackOff","message":"m",)"
         R"("source":{"component":")" +
         component + R"(","host":"node-1"},"type":"Warning"})";
}

TEST_CASE("EventSpamFilter keys core and events.k8s.io Events by source and object") {
  auto a = EventSpamFilter::SpamKey(CoreEvent("kubelet", "p"));
  REQUIRE(a.has_value());
  CHECK(*a != *EventSpamFilter::SpamKey(CoreEvent("kubelet", "q")));
  CHECK(*a != *EventSpamFilter::SpamKey(CoreEvent("scheduler", "p")));
  auto e = EventSpamFilter::SpamKey(
      R"({"kind":"Event","apiVersion":"events.k8s.io/v1","reportingController":"kubelet",)"
      R"("reportingInstance":"node-1","regarding":{"kind":"Pod","name":"p"}})");
  REQUIRE(e.has_value());
  CHECK_FALSE(EventSpamFilter::SpamKey(R"({"kind":"Pod"})").has_value());
  CHECK_FALSE(EventSpamFilter::SpamKey("not json").has_value());
}

TEST_CASE("EventSpamFilter lets a burst through, then one per period, per key") {
  EventSpamFilter f({1.0 / 300, 25, 1000});
  EventSpamFilter::Clock::time_point t{};
  for (int i = 0; i < 25; ++i) CHECK(f.Allow("node-1", CoreEvent("kubelet", "p"), t));
  CHECK_FALSE(f.Allow("node-1", CoreEvent("kubelet", "p"), t));
  CHECK(f.Allow("node-1", CoreEvent("kubelet", "other"), t));   // Another object: its own budget.
  CHECK(f.Allow("node-1", CoreEvent("other-source", "p"), t));  // Another source too.
  t += 299s;
  CHECK_FALSE(f.Allow("node-1", CoreEvent("kubelet", "p"), t));
  t += 1s;
  CHECK(f.Allow("node-1", CoreEvent("kubelet", "p"), t));
  CHECK(f.Allow("node-1", "unreadable", t));  // The apiserver judges what we cannot read.
  CHECK(f.rejected() == 2);
}

TEST_CASE(
    "EventSpamFilter keeps each user's buckets apart: claims in a body spend only the "
    "sender's budget") {
  EventSpamFilter f({1.0 / 300, 25, 1000});
  EventSpamFilter::Clock::time_point t{};
  // An attacker claims node-1's kubelet as the source of 30 events.
  for (int i = 0; i < 30; ++i)
    f.Allow("system:anonymous-or-attacker", CoreEvent("kubelet", "p"), t);
  // node-1's own kubelet is not silenced.
  CHECK(f.Allow("system:node:node-1", CoreEvent("kubelet", "p"), t));
}

TEST_CASE("EventSpamFilter with a full table forgets the fullest buckets, never a silenced one") {
  EventSpamFilter f({1.0 / 300, 25, 64});
  EventSpamFilter::Clock::time_point t{};
  for (int i = 0; i < 25; ++i) REQUIRE(f.Allow("node", CoreEvent("kubelet", "p"), t));
  REQUIRE_FALSE(f.Allow("node", CoreEvent("kubelet", "p"), t));
  // Fill the table many times over with fresh keys (each used once: nearly full buckets).
  for (int i = 0; i < 1000; ++i)
    f.Allow("flooder", CoreEvent("kubelet", "x" + std::to_string(i)), t);
  CHECK_FALSE(f.Allow("node", CoreEvent("kubelet", "p"), t));  // Still held back.
}

TEST_CASE("EventSpamFilter does not parse bodies nested past the limit") {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  CHECK_FALSE(EventSpamFilter::SpamKey(deep).has_value());
  const std::string event_with_deep_field =
      R"({"kind":"Event","apiVersion":"v1","x":)" + deep + "}";
  CHECK_FALSE(EventSpamFilter::SpamKey(event_with_deep_field).has_value());
}

}  // namespace
}  // namespace kf::ratelimit
