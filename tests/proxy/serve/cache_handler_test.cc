// CacheHandler: a read of a cached resource from request to answer, with its TokenReview and
// SubjectAccessReview, against a scripted upstream on loopback (decision_test.cc has the
// decision's whole table; the integration suite has the apiserver's own answers).
#include "proxy/serve/cache_handler.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/cache/test_objects.h"
#include "tests/proxy/sync/scripted_upstream.h"

namespace kf {
namespace {

constexpr std::string_view kCoreV1 =
    R"({"kind":"APIResourceList","groupVersion":"v1","resources":[)"
    R"({"name":"pods","namespaced":true,"kind":"Pod","verbs":["get","list","watch"]}]})";
constexpr std::string_view kTokenReviews = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr std::string_view kAccessReviews = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
constexpr std::string_view kAlice =
    R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{)"
    R"("authenticated":true,"user":{"username":"alice","groups":["system:authenticated"]}}})";

std::string Allowed(bool allowed) {
  return absl::StrCat(R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview",)",
                      R"("status":{"allowed":)", allowed ? "true" : "false", "}}");
}

struct HandlerRig {
  HandlerRig() {
    upstream.lists = {test::PodList(
        5, {testing::PodJson("ns", "a", 3, "node-1"), testing::PodJson("other", "b", 4)})};
    upstream.documents["/api/v1"] = {200, std::string(kCoreV1)};
    upstream.documents[std::string(kTokenReviews)] = {201, std::string(kAlice)};
    upstream.documents[std::string(kAccessReviews)] = {201, Allowed(true)};
    test::Spawn(ioc, test::ScriptedUpstream::Serve(&upstream));
    cache.Start(ioc, upstream.up.pool, upstream.up.pool, [] { return std::string(); });
    REQUIRE(test::RunUntil(
        ioc, [&] { return cache.started() && cache.AllSynced(); }, std::chrono::seconds(5)));
  }
  ~HandlerRig() {
    cache.Stop();
    upstream.up.acceptor.close();
    test::RunUntil(
        ioc, [] { return false; }, std::chrono::milliseconds(50));
  }

  // Serves `call` through the handler: whether it answered (false: declined, to pass through).
  bool Serve(test::FilterCall& call) { return test::Run(ioc, handler.Serve(call.x)); }
  size_t Reviews(std::string_view kind) const {
    size_t n = 0;
    for (const std::string& t : upstream.document_targets) n += t == kind;
    return n;
  }

  asio::io_context ioc;
  test::ScriptedUpstream upstream{ioc};
  Logger log{2, Logger::Level::kError};
  CachedResources cache{*ResourceSpec::ParseList({"pods"}), EventRingLimits{}, log};
  ReviewStats review_stats;
  ReviewSlots slots;
  Authenticator authn{CacheSettings{}, review_stats, slots, [] { return "Bearer own"; }};
  AccessAnswers answers{100, ""};
  AccessReview access{CacheSettings{}, review_stats, slots, [] { return "Bearer own"; }, answers};
  Wakeups wakeups{ioc.get_executor()};
  CacheServeStats stats;
  CacheHandler handler{cache, upstream.up.pool, authn, access, wakeups, stats, WatchOptions{}};
};

test::FilterCall& WithToken(test::FilterCall& call) {
  call.r.fields.set(http::field::authorization, "Bearer alice-token");
  call.r.fields.set(http::field::accept, "application/json");
  return call;
}

// Declined: the handler answered nothing, so the request passes through for the apiserver's answer.
void CheckDeclined(HandlerRig& rig, test::FilterCall& call) {
  CHECK_FALSE(rig.Serve(call));
  CHECK_FALSE(call.resp.head.has_value());
  CHECK(call.resp.body.empty());
}

}  // namespace

TEST_CASE("an allowed user's LIST is answered from the cache, the namespace's objects only",
          "[cache_handler]") {
  HandlerRig rig;
  test::FilterCall call(http::verb::get, "/api/v1/namespaces/ns/pods?resourceVersion=0");
  REQUIRE(rig.Serve(WithToken(call)));
  REQUIRE(call.resp.head.has_value());
  CHECK(call.resp.status() == 200);
  CHECK_THAT(call.resp.body, Catch::Contains(R"("name":"a")"));
  CHECK_THAT(call.resp.body, !Catch::Contains(R"("name":"b")"));
  CHECK(rig.stats.lists == 1);
  // One review of each kind: the whole resource's question first (one answer for every
  // namespace), for this user; the read itself cost no LIST.
  CHECK(rig.Reviews(kTokenReviews) == 1);
  REQUIRE(rig.Reviews(kAccessReviews) == 1);
  const std::string& review = rig.upstream.document_bodies.back();
  CHECK_THAT(review, Catch::Contains(R"("user":"alice")") && Catch::Contains(R"("verb":"list")") &&
                         Catch::Contains(R"("namespace":"")"));
  CHECK(rig.upstream.list_targets.size() == 1);

  // The same read again: both answers come from the review caches.
  test::FilterCall again(http::verb::get, "/api/v1/namespaces/ns/pods?resourceVersion=0");
  REQUIRE(rig.Serve(WithToken(again)));
  CHECK(again.resp.body == call.resp.body);
  CHECK(rig.Reviews(kTokenReviews) == 1);
  CHECK(rig.Reviews(kAccessReviews) == 1);
}

TEST_CASE("a GET is answered with the cached object", "[cache_handler]") {
  HandlerRig rig;
  test::FilterCall call(http::verb::get, "/api/v1/namespaces/ns/pods/a?resourceVersion=0");
  REQUIRE(rig.Serve(WithToken(call)));
  CHECK(call.resp.status() == 200);
  CHECK_THAT(call.resp.body,
             Catch::StartsWith(R"({"kind":"Pod")") && Catch::Contains(R"("resourceVersion":"3")"));
  CHECK(rig.stats.gets == 1);
}

TEST_CASE("a user allowed one namespace only is asked about that namespace, then served",
          "[cache_handler]") {
  HandlerRig rig;
  rig.upstream.respond = [](const std::string& target, const std::string& body) {
    if (target != kAccessReviews) return std::pair<int, std::string>{201, std::string(kAlice)};
    const bool in_ns = body.find(R"("namespace":"ns")") != std::string::npos;
    return std::pair<int, std::string>{201, Allowed(in_ns)};
  };
  test::FilterCall call(http::verb::get, "/api/v1/namespaces/ns/pods?resourceVersion=0");
  REQUIRE(rig.Serve(WithToken(call)));
  CHECK(call.resp.status() == 200);
  CHECK_THAT(call.resp.body, Catch::Contains(R"("name":"a")"));
  REQUIRE(rig.Reviews(kAccessReviews) == 2);
  CHECK_THAT(rig.upstream.document_bodies.back(), Catch::Contains(R"("namespace":"ns")"));
}

TEST_CASE("a denied read is declined with nothing written: the apiserver answers it",
          "[cache_handler]") {
  HandlerRig rig;
  rig.upstream.documents[std::string(kAccessReviews)] = {201, Allowed(false)};
  test::FilterCall call(http::verb::get, "/api/v1/namespaces/ns/pods?resourceVersion=0");
  CheckDeclined(rig, WithToken(call));
  CHECK(rig.stats.declined == 1);
  CHECK(rig.Reviews(kAccessReviews) == 2);  // The whole resource, then the namespace.
}

TEST_CASE("a read without credentials is declined before any review", "[cache_handler]") {
  HandlerRig rig;
  test::FilterCall call(http::verb::get, "/api/v1/namespaces/ns/pods?resourceVersion=0");
  CheckDeclined(rig, call);
  CHECK(rig.Reviews(kTokenReviews) == 0);
  CHECK(rig.Reviews(kAccessReviews) == 0);
}

TEST_CASE("a resource kube-fanout does not cache is declined at once", "[cache_handler]") {
  HandlerRig rig;
  test::FilterCall call(http::verb::get, "/api/v1/namespaces/ns/secrets?resourceVersion=0");
  CheckDeclined(rig, WithToken(call));
  CHECK(rig.Reviews(kTokenReviews) == 0);
}

}  // namespace kf
