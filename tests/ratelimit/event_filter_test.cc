#include "ratelimit/event_filter.h"

#include <catch2/catch.hpp>

namespace kf::ratelimit {
namespace {

using namespace std::chrono_literals;

std::string CoreEvent(const std::string& component, const std::string& pod) {
  return R"({"kind":"Event","apiVersion":"v1","metadata":{"generateName":"x."},)"
         R"("involvedObject":{"kind":"Pod","namespace":"ns","name":")" +
         pod + R"(","uid":"u1","apiVersion":"v1"},"reason":"BackOff","message":"m",)"
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
  for (int i = 0; i < 25; ++i) CHECK(f.Allow(CoreEvent("kubelet", "p"), t));
  CHECK_FALSE(f.Allow(CoreEvent("kubelet", "p"), t));
  CHECK(f.Allow(CoreEvent("kubelet", "other"), t));  // Another object: its own budget.
  CHECK(f.Allow(CoreEvent("other-source", "p"), t));  // Another source too.
  t += 299s;
  CHECK_FALSE(f.Allow(CoreEvent("kubelet", "p"), t));
  t += 1s;
  CHECK(f.Allow(CoreEvent("kubelet", "p"), t));
  CHECK(f.Allow("unreadable", t));  // The apiserver judges what we cannot read.
  CHECK(f.rejected() == 2);
}

}  // namespace
}  // namespace kf::ratelimit
