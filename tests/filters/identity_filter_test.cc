#include "filters/identity_filter.h"

#include <catch2/catch.hpp>

#include "tests/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kAliceReview =
    R"({"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1",)"
    R"("status":{"userInfo":{"username":"alice","groups":["devs","system:authenticated"]}}})";
const std::string kAlice = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n" +
                           ("Content-Length: " + std::to_string(kAliceReview.size())) + "\r\n\r\n" +
                           std::string(kAliceReview);

// An identity filter whose reviews go to a fake upstream answering `answer`.
struct Identities {
  explicit Identities(std::string_view answer, bool always, bool event_creations)
      : filter(who, up.pool, always, event_creations) {
    up.answer = std::string(answer);
  }
  // Serves `call`; the upstream answers one review when `reviewed`.
  void Serve(FilterCall& call, bool reviewed = true) {
    if (reviewed) Spawn(ioc, FakeUpstream::ServeOne(&up));
    Run(ioc, filter.Serve(call.x, call.next));
  }
  asio::io_context ioc;
  FakeUpstream up{ioc};
  WhoAmI who{std::chrono::seconds(60), std::chrono::seconds(10), 100};
  IdentityFilter filter;
};

// A request carrying a bearer token.
struct CallWith : FilterCall {
  CallWith(std::string_view token, http::verb method, std::string target)
      : FilterCall(method, std::move(target)) {
    r.fields.set(http::field::authorization, "Bearer " + std::string(token));
  }
};

TEST_CASE("IdentityFilter learns the caller from a review made with the caller's credentials") {
  Identities ids(kAlice, /*always=*/true, /*event_creations=*/false);
  CallWith call("alice-token", http::verb::get, "/api/v1/namespaces/ns/configmaps");
  ids.Serve(call);
  CHECK(call.probe.calls == 1);
  REQUIRE(call.x.user.has_value());
  CHECK(call.x.user->username == "alice");
  CHECK(call.x.user->groups == std::vector<std::string>{"devs", "system:authenticated"});
  CHECK(ids.up.request.method() == http::verb::post);
  CHECK(ids.up.request.target() == "/apis/authentication.k8s.io/v1/selfsubjectreviews");
  CHECK(ids.up.request[http::field::authorization] == "Bearer alice-token");
  CHECK(ids.who.reviews() == 1);
}

TEST_CASE(
    "IdentityFilter goes on without an identity when the apiserver does not know the caller") {
  Identities ids("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", true, false);
  CallWith call("bogus", http::verb::get, "/api/v1/namespaces/ns/configmaps");
  ids.Serve(call);
  CHECK(call.probe.calls == 1);
  CHECK_FALSE(call.x.user.has_value());
  CHECK_FALSE(call.resp.head.has_value());
}

TEST_CASE("IdentityFilter for the spam filter alone looks up Event creations only") {
  Identities ids(kAlice, /*always=*/false, /*event_creations=*/true);
  CallWith list("alice-token", http::verb::get, "/api/v1/namespaces/ns/events");
  ids.Serve(list, /*reviewed=*/false);
  CHECK(list.probe.calls == 1);
  CHECK_FALSE(list.x.user.has_value());
  CHECK(ids.who.reviews() == 0);

  CallWith create("alice-token", http::verb::post, "/api/v1/namespaces/ns/events");
  ids.Serve(create);
  CHECK(create.probe.calls == 1);
  REQUIRE(create.x.user.has_value());
  CHECK(create.x.user->username == "alice");
}

}  // namespace
}  // namespace kf::test
