#include "proxy/filters/event_spam_gate.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kEvent =
    R"({"kind":"Event","apiVersion":"v1","metadata":{"generateName":"p."},)"
    R"("involvedObject":{"kind":"Pod","namespace":"ns","name":"p","uid":"u1","apiVersion":"v1"},)"
    R"("reason":"BackOff","source":{"component":"kubelet","host":"node-1"},"type":"Warning"})";

// An Event creation sent by `user` (none: unauthenticated), its body in small pieces.
struct EventPost : FilterCall {
  explicit EventPost(std::optional<std::string> user,
                     std::string target = "/api/v1/namespaces/ns/events")
      : FilterCall(http::verb::post, std::move(target)) {
    r.body.Set(std::string(kEvent));
    r.body.piece = 7;
    if (user) x.user = Identity{*user, {}};
  }
};

// A gate whose users may each send one Event per object, then one per 5 minutes.
struct Gate {
  asio::io_context ioc;
  ratelimit::EventSpamFilter spam{{1.0 / 300, 1, 100}};
  EventSpamGate gate{spam};
  void Serve(EventPost& post) { Run(ioc, gate.Serve(post.x, post.next)); }
};

TEST_CASE("EventSpamGate passes an unauthenticated Event creation on with its body unread") {
  Gate g;
  EventPost post(std::nullopt);
  g.Serve(post);
  CHECK(post.probe.calls == 1);
  CHECK(post.r.body.read() == 0);
  CHECK_FALSE(post.r.request.whole_body.has_value());
  CHECK(g.spam.allowed() == 0);
}

TEST_CASE("EventSpamGate passes what is not an Event creation on untouched") {
  Gate g;
  EventPost configmap("alice", "/api/v1/namespaces/ns/configmaps");
  g.Serve(configmap);
  CHECK(configmap.probe.calls == 1);
  CHECK(configmap.r.body.read() == 0);
  CHECK_FALSE(configmap.r.request.whole_body.has_value());
}

TEST_CASE("EventSpamGate reads an authenticated Event creation whole for the relay to send") {
  Gate g;
  EventPost post("system:node:node-1", "/apis/events.k8s.io/v1/namespaces/ns/events");
  g.Serve(post);
  CHECK(post.probe.calls == 1);
  REQUIRE(post.r.request.whole_body.has_value());
  CHECK(*post.r.request.whole_body == kEvent);
  CHECK(post.r.body.done());
  CHECK(g.spam.allowed() == 1);
}

TEST_CASE("EventSpamGate answers 429 with Retry-After 300 past the user's budget for an object") {
  Gate g;
  EventPost first("system:node:node-1");
  g.Serve(first);
  REQUIRE(first.probe.calls == 1);

  EventPost second("system:node:node-1");
  g.Serve(second);
  CheckRefused(second, 429, "300", "event spam filter");
  CHECK(g.spam.rejected() == 1);

  EventPost other_user("system:node:node-2");  // Budgets are per user.
  g.Serve(other_user);
  CHECK(other_user.probe.calls == 1);
}

TEST_CASE("EventSpamGate refuses an Event body over 3 MiB with 413 and closes the connection") {
  Gate g;
  EventPost huge("alice");
  huge.r.body.Set(std::string((3u << 20) + 1, ' '));
  huge.r.body.piece = 1u << 20;
  g.Serve(huge);
  CheckRefused(huge, 413, "", "event body too large or unreadable");
  CHECK(huge.resp.close_after);
}

}  // namespace
}  // namespace kf::test
