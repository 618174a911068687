#include "proxy/filters/identity_filter.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kAliceReview =
    R"({"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1",)"
    R"("status":{"authenticated":true,"user":{"username":"alice","uid":"u-1",)"
    R"("groups":["devs","system:authenticated"],"extra":{"b":["2"],"a":["1","x"]}}}})";
const std::string kAlice = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n" +
                           ("Content-Length: " + std::to_string(kAliceReview.size())) + "\r\n\r\n" +
                           std::string(kAliceReview);

// An identity filter whose reviews go to a fake upstream answering `answer`.
struct Identities {
  explicit Identities(std::string_view answer, bool always, bool event_creations,
                      CacheSettings settings = {std::chrono::seconds(60), std::chrono::seconds(10),
                                                100})
      : who(settings, stats, slots, [] { return std::string("Bearer own-token"); }),
        filter(who, up.pool, always, event_creations) {
    up.answer = std::string(answer);
  }
  // Serves `call`; the upstream answers one review when `reviewed`.
  void Serve(FilterCall& call, bool reviewed = true) {
    if (reviewed) Spawn(ioc, FakeUpstream::ServeOne(&up));
    Run(ioc, filter.Serve(call.x, call.next));
  }
  asio::io_context ioc;
  FakeUpstream up{ioc};
  ReviewStats stats;
  ReviewSlots slots{4};
  Authenticator who;
  IdentityFilter filter;
};

// A request carrying a bearer token.
struct CallWith : FilterCall {
  CallWith(std::string_view token, http::verb method, std::string target)
      : FilterCall(method, std::move(target)) {
    r.fields.set(http::field::authorization, "Bearer " + std::string(token));
  }
};

TEST_CASE("IdentityFilter learns the caller from a TokenReview made with kube-fanout's identity") {
  Identities ids(kAlice, /*always=*/true, /*event_creations=*/false);
  CallWith call("alice-token", http::verb::get, "/api/v1/namespaces/ns/configmaps");
  ids.Serve(call);
  CHECK(call.probe.calls == 1);
  REQUIRE(call.x.user.has_value());
  CHECK(call.x.user->username == "alice");
  CHECK(call.x.user->uid == "u-1");
  CHECK(call.x.user->groups == std::vector<std::string>{"devs", "system:authenticated"});
  using Extra = std::vector<std::pair<std::string, std::vector<std::string>>>;
  CHECK(call.x.user->extra == Extra{{"a", {"1", "x"}}, {"b", {"2"}}});
  CHECK(ids.up.request.method() == http::verb::post);
  CHECK(ids.up.request.target() == "/apis/authentication.k8s.io/v1/tokenreviews");
  CHECK(ids.up.request[http::field::authorization] == "Bearer own-token");
  CHECK(ids.up.request.body() == R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",)"
                                 R"("spec":{"token":"alice-token"}})");
  CHECK(ids.stats.allowed == 1);

  // The same token again: from the cache, no review.
  CallWith again("alice-token", http::verb::get, "/api/v1/namespaces/ns/pods");
  ids.Serve(again, /*reviewed=*/false);
  REQUIRE(again.x.user.has_value());
  CHECK(again.x.user->username == "alice");
  CHECK(ids.stats.cache_hits == 1);
  CHECK(ids.stats.allowed == 1);
}

TEST_CASE("IdentityFilter takes a verified client certificate's user without a review") {
  Identities ids(kAlice, /*always=*/true, /*event_creations=*/false);
  CallWith call("alice-token", http::verb::get, "/api/v1/pods");
  ClientCertificate cert;
  cert.presented = cert.verified = true;
  cert.user = Identity{"system:node:n1", {"system:nodes"}};
  call.r.request.client_cert = &cert;
  ids.Serve(call, /*reviewed=*/false);
  REQUIRE(call.x.user.has_value());
  CHECK(call.x.user->username == "system:node:n1");
  CHECK(call.x.user->groups == std::vector<std::string>{"system:nodes", "system:authenticated"});
  CHECK(ids.stats.allowed == 0);
}

TEST_CASE(
    "IdentityFilter goes on without an identity when the apiserver does not know the caller") {
  constexpr std::string_view kNo =
      R"({"kind":"TokenReview","status":{"user":{},"error":"invalid bearer token"}})";
  Identities ids("HTTP/1.1 201 Created\r\nContent-Length: " + std::to_string(kNo.size()) +
                     "\r\n\r\n" + std::string(kNo),
                 true, false);
  CallWith call("bogus", http::verb::get, "/api/v1/namespaces/ns/configmaps");
  ids.Serve(call);
  CHECK(call.probe.calls == 1);
  CHECK_FALSE(call.x.user.has_value());
  CHECK_FALSE(call.resp.head.has_value());
  CHECK(ids.stats.denied == 1);
}

TEST_CASE("IdentityFilter goes on without an identity when kube-fanout may not review tokens") {
  Identities ids("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", true, false);
  CallWith call("alice-token", http::verb::get, "/api/v1/namespaces/ns/configmaps");
  ids.Serve(call);
  CHECK(call.probe.calls == 1);
  CHECK_FALSE(call.x.user.has_value());
  CHECK(ids.stats.errors == 1);
  // The apiserver answered (a refusal): unknown, for the apiserver to judge, not unavailable.
  CHECK_FALSE(call.x.identity_unavailable);
  CHECK_FALSE(call.x.identity_throttled);
  CHECK_FALSE(call.x.unauthenticated);
}

TEST_CASE("IdentityFilter marks a lookup the apiserver was too busy to answer as unavailable") {
  Identities ids("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n",
                 true, false);
  CallWith call("alice-token", http::verb::get, "/api/v1/namespaces/ns/configmaps");
  ids.Serve(call);
  CHECK(call.probe.calls == 1);  // Admission still sees it (as unknown).
  CHECK_FALSE(call.x.user.has_value());
  CHECK(call.x.identity_unavailable);
  CHECK_FALSE(call.x.unauthenticated);
  CHECK(ids.stats.errors == 1);
}

TEST_CASE("IdentityFilter reviews new tokens within a budget and leaves the rest unknown") {
  // One new review, then none for a long while: made-up tokens cost no more reviews.
  Identities ids(kAlice, /*always=*/true, /*event_creations=*/false,
                 CacheSettings{std::chrono::seconds(60), std::chrono::seconds(10), 100,
                               /*reviews_per_second=*/0.001, /*review_burst=*/1});
  CallWith first("alice-token", http::verb::get, "/api/v1/pods");
  ids.Serve(first);
  REQUIRE(first.x.user.has_value());
  CHECK(ids.stats.allowed == 1);
  CallWith made_up("made-up-token", http::verb::get, "/api/v1/pods");
  ids.Serve(made_up, /*reviewed=*/false);
  CHECK(made_up.probe.calls == 1);
  CHECK_FALSE(made_up.x.user.has_value());
  CHECK_FALSE(made_up.x.unauthenticated);       // Unknown, not judged.
  CHECK_FALSE(made_up.x.identity_unavailable);  // Not asked: no answer was waited for.
  CHECK(made_up.x.identity_throttled);          // A cached read is refused 429, not passed through.
  CHECK(ids.stats.throttled == 1);
  // A token already known costs nothing from the budget.
  CallWith again("alice-token", http::verb::get, "/api/v1/pods");
  ids.Serve(again, /*reviewed=*/false);
  REQUIRE(again.x.user.has_value());
  CHECK_FALSE(again.x.identity_throttled);
  CHECK(ids.stats.throttled == 1);
}

TEST_CASE("IdentityFilter for the spam filter alone looks up Event creations only") {
  Identities ids(kAlice, /*always=*/false, /*event_creations=*/true);
  CallWith list("alice-token", http::verb::get, "/api/v1/namespaces/ns/events");
  ids.Serve(list, /*reviewed=*/false);
  CHECK(list.probe.calls == 1);
  CHECK_FALSE(list.x.user.has_value());
  CHECK(ids.stats.allowed == 0);

  CallWith create("alice-token", http::verb::post, "/api/v1/namespaces/ns/events");
  ids.Serve(create);
  CHECK(create.probe.calls == 1);
  REQUIRE(create.x.user.has_value());
  CHECK(create.x.user->username == "alice");
}

}  // namespace
}  // namespace kf::test
