#include "ratelimit/event_filter.h"

#include <catch2/catch.hpp>

#include "common/api/kube_proto.h"
#include "common/api/protowire.h"

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

// The same core/v1 Event as CoreEvent, as kubelet sends it: protobuf in the apiserver's
// envelope (k8s.io/api core/v1 generated.proto field numbers).
std::string ProtoRef(const std::string& pod) {
  std::string ref;
  AppendBytesField(&ref, 1, "Pod");
  AppendBytesField(&ref, 2, "ns");
  AppendBytesField(&ref, 3, pod);
  AppendBytesField(&ref, 4, "u1");
  AppendBytesField(&ref, 5, "v1");
  return ref;
}
std::string ProtoCoreEvent(const std::string& component, const std::string& pod) {
  std::string meta, source, event;
  AppendBytesField(&meta, 2, "x.");  // generateName
  AppendBytesField(&source, 1, component);
  AppendBytesField(&source, 2, "node-1");
  AppendBytesField(&event, 1, meta);
  AppendBytesField(&event, 2, ProtoRef(pod));
  AppendBytesField(&event, 3, "BackOff");
  AppendBytesField(&event, 4, "m");
  AppendBytesField(&event, 5, source);
  AppendVarintField(&event, 8, 1);  // count
  AppendBytesField(&event, 9, "Warning");
  return WrapUnknown("v1", "Event", event);
}

constexpr auto kProto = EventSpamFilter::Encoding::kProtobuf;

TEST_CASE("EventSpamFilter keys a protobuf Event as the same Event in JSON") {
  const auto json = EventSpamFilter::SpamKey(CoreEvent("kubelet", "p"));
  const auto proto = EventSpamFilter::SpamKey(ProtoCoreEvent("kubelet", "p"), kProto);
  REQUIRE(json.has_value());
  REQUIRE(proto.has_value());
  CHECK(*proto == *json);
  CHECK(*EventSpamFilter::SpamKey(ProtoCoreEvent("kubelet", "q"), kProto) != *proto);
  CHECK(*EventSpamFilter::SpamKey(ProtoCoreEvent("scheduler", "p"), kProto) != *proto);

  // events.k8s.io/v1: reportingController 4, reportingInstance 5, regarding 8.
  std::string v1;
  AppendBytesField(&v1, 4, "kubelet");
  AppendBytesField(&v1, 5, "node-1");
  AppendBytesField(&v1, 8, ProtoRef("p"));
  const auto events_json = EventSpamFilter::SpamKey(
      R"({"kind":"Event","apiVersion":"events.k8s.io/v1","reportingController":"kubelet",)"
      R"("reportingInstance":"node-1","regarding":{"kind":"Pod","namespace":"ns","name":"p",)"
      R"("uid":"u1","apiVersion":"v1"}})");
  const auto events_proto =
      EventSpamFilter::SpamKey(WrapUnknown("events.k8s.io/v1", "Event", v1), kProto);
  REQUIRE(events_proto.has_value());
  CHECK(*events_proto == *events_json);

  // As Go's decoder: a repeated string's last value wins, a repeated message's parts merge.
  std::string twice;
  AppendBytesField(&twice, 5, "ignored");
  AppendBytesField(&twice, 5, "node-1");
  std::string first_ref, second_ref;
  AppendBytesField(&first_ref, 1, "Pod");
  AppendBytesField(&first_ref, 2, "ns");
  AppendBytesField(&first_ref, 3, "other");
  AppendBytesField(&second_ref, 3, "p");
  AppendBytesField(&second_ref, 4, "u1");
  AppendBytesField(&second_ref, 5, "v1");
  AppendBytesField(&twice, 4, "kubelet");
  AppendBytesField(&twice, 8, first_ref);
  AppendBytesField(&twice, 8, second_ref);
  CHECK(EventSpamFilter::SpamKey(WrapUnknown("events.k8s.io/v1", "Event", twice), kProto) ==
        events_json);
}

TEST_CASE("EventSpamFilter reads no key from protobuf that is not an Event or does not parse") {
  const std::string event = ProtoCoreEvent("kubelet", "p");
  CHECK_FALSE(EventSpamFilter::SpamKey(WrapUnknown("v1", "Pod", "")).has_value());
  CHECK_FALSE(EventSpamFilter::SpamKey(WrapUnknown("v1", "Pod", ""), kProto).has_value());
  CHECK_FALSE(EventSpamFilter::SpamKey(event).has_value());  // Protobuf read as JSON.
  CHECK_FALSE(EventSpamFilter::SpamKey(CoreEvent("kubelet", "p"), kProto).has_value());
  CHECK_FALSE(EventSpamFilter::SpamKey("", kProto).has_value());
  // Every truncation: no key or a key, never a crash (the reader is bounded by the bytes).
  for (size_t n = 0; n < event.size(); ++n)
    (void)EventSpamFilter::SpamKey(event.substr(0, n), kProto);
  // A length past the end inside the Event: malformed.
  std::string bad;
  AppendTag(&bad, 2, WireType::kBytes);
  AppendVarint(&bad, 1000);
  bad += "Pod";
  CHECK_FALSE(EventSpamFilter::SpamKey(WrapUnknown("v1", "Event", bad), kProto).has_value());
}

TEST_CASE(
    "EventSpamFilter refuses the 26th protobuf Event about one object, as the 26th JSON one") {
  EventSpamFilter f({});
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < 25; ++i) CHECK(f.Allow("node-1", ProtoCoreEvent("kubelet", "p"), t, kProto));
  CHECK_FALSE(f.Allow("node-1", ProtoCoreEvent("kubelet", "p"), t, kProto));
  // The same bucket whichever the encoding.
  CHECK_FALSE(f.Allow("node-1", CoreEvent("kubelet", "p"), t));
  CHECK(f.Allow("node-1", ProtoCoreEvent("kubelet", "q"), t, kProto));
  CHECK(f.rejected() == 2);
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
