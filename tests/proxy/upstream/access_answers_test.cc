#include "proxy/upstream/access_answers.h"

#include <catch2/catch.hpp>

#include "proxy/upstream/access_review.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kProbe = "kube-fanout-probe-0123456789abcdef";

std::string Http(std::string_view body) {
  return "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}
constexpr std::string_view kAnswerAllowed =
    R"({"kind":"SubjectAccessReview","status":{"allowed":true}})";
constexpr std::string_view kDenied = R"({"kind":"SubjectAccessReview","status":{"allowed":false}})";

TEST_CASE("AccessAnswers keep an answer until it expires, for every thread") {
  AccessAnswers answers{2, ""};
  const auto now = std::chrono::steady_clock::now();
  answers.Put("a", true, now + std::chrono::seconds(5));
  answers.Put("b", false, now + std::chrono::seconds(5));
  CHECK(answers.Find("a", now) == true);
  CHECK(answers.Find("b", now) == false);
  CHECK_FALSE(answers.Find("a", now + std::chrono::seconds(6)));  // Expired: dropped.
  CHECK(answers.size() == 1);
  answers.Put("c", true, now + std::chrono::seconds(9));
  answers.Put("d", true, now + std::chrono::seconds(9));
  CHECK(answers.size() <= 2);  // Bounded.
}

asio::awaitable<void> ShareInto(AccessAnswers& answers, std::function<asio::awaitable<Access>()> f,
                                std::optional<Access>& out) {
  const Access got = co_await answers.Share("key", std::move(f));
  out = got;
}

TEST_CASE("AccessAnswers share a review in flight with a caller on another executor") {
  // Two io_contexts stand for two worker threads, run in turn here.
  asio::io_context first_ioc, second_ioc;
  AccessAnswers answers{100, ""};
  asio::steady_timer release(first_ioc, asio::steady_timer::time_point::max());
  int fetched = 0;
  std::optional<Access> first, second;
  const auto slow = [&]() -> asio::awaitable<Access> {
    ++fetched;
    co_await release.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return Access::kAllowed;
  };
  const auto other = [&]() -> asio::awaitable<Access> {
    ++fetched;
    co_return Access::kDenied;
  };
  const Spawned a = Spawn(first_ioc, ShareInto(answers, slow, first));
  first_ioc.poll();
  const Spawned b = Spawn(second_ioc, ShareInto(answers, other, second));
  second_ioc.poll();
  CHECK(fetched == 1);
  CHECK_FALSE(second);  // Waiting for the first caller's answer.
  release.cancel();
  first_ioc.poll();
  REQUIRE(first == Access::kAllowed);
  REQUIRE(RunUntil(second_ioc, [&] { return second.has_value(); }));
  CHECK(second == Access::kAllowed);
  CHECK(fetched == 1);
}

struct NodeReviews {
  Access Ask(const Identity& who, const char* target, int connections = 1) {
    for (int i = 0; i < connections; ++i)
      servers.push_back(Spawn(ioc, FakeUpstream::ServeOne(&up)));
    auto info = RequestInfo::Parse("GET", target);
    REQUIRE(info.ok());
    return Run(ioc, access.Allowed(up.pool, Vouched::By::kCertificate, who, *info));
  }
  asio::io_context ioc;
  FakeUpstream up{ioc};
  std::vector<Spawned> servers;
  ReviewStats stats;
  ReviewSlots slots{4, 4, milliseconds(500)};
  AccessAnswers answers{100, std::string(kProbe)};
  AccessReview access{CacheSettings{}, stats, slots, [] { return std::string("Bearer own"); },
                      answers};
};

Identity Node(const char* name) {
  return Identity{std::string("system:node:") + name, {"system:nodes", "system:authenticated"}};
}

TEST_CASE("Nodes share the probe node's yes for a request shape: one review for all of them") {
  NodeReviews r;
  r.up.answer = Http(kAnswerAllowed);
  CHECK(r.Ask(Node("n1"), "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1") == Access::kAllowed);
  const std::string& asked = r.up.request.body();
  CHECK(asked.find(R"("user":"system:node:kube-fanout-probe-0123456789abcdef")") !=
        std::string::npos);
  CHECK(asked.find("spec.nodeName=kube-fanout-probe-0123456789abcdef") != std::string::npos);
  CHECK(r.stats.allowed == 1);
  // Another node's own pods: the same shape, no review (no upstream answer is left to give).
  CHECK(r.Ask(Node("n2"), "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2", 0) == Access::kAllowed);
  CHECK(r.stats.allowed == 1);
  CHECK(r.stats.shared == 2);
}

TEST_CASE("The probe node's no sends the node's own review") {
  NodeReviews r;
  r.up.answer = Http(kDenied);
  CHECK(r.Ask(Node("n1"), "/api/v1/namespaces/ns/configmaps/c", 2) == Access::kDenied);
  CHECK(r.up.request.body().find(R"("user":"system:node:n1")") != std::string::npos);
  CHECK(r.stats.denied == 2);  // The probe's, then the node's own.
  CHECK(r.stats.shared == 0);
  // Neither asked again while the denials are kept.
  CHECK(r.Ask(Node("n1"), "/api/v1/namespaces/ns/configmaps/c", 0) == Access::kDenied);
  CHECK(r.stats.denied == 2);
}

TEST_CASE("A user that is not a plain node identity is asked about itself") {
  NodeReviews r;
  r.up.answer = Http(kAnswerAllowed);
  Identity node_with_uid = Node("n1");
  node_with_uid.uid = "u1";
  CHECK(r.Ask(node_with_uid, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1") == Access::kAllowed);
  CHECK(r.up.request.body().find(R"("user":"system:node:n1")") != std::string::npos);
  CHECK(r.stats.shared == 0);
}

TEST_CASE("Nodes in a further group share the probe's yes asked in that group, and only they") {
  NodeReviews r;
  r.up.answer = Http(kAnswerAllowed);
  Identity proxier = Node("n1");
  proxier.groups.push_back("kf:node-proxiers");
  const char* slices = "/apis/discovery.k8s.io/v1/endpointslices";
  CHECK(r.Ask(proxier, slices) == Access::kAllowed);
  // Asked for the probe, in exactly the node's groups.
  CHECK(r.up.request.body().find(R"("user":"system:node:kube-fanout-probe-0123456789abcdef",)"
                                 R"("groups":["system:nodes","system:authenticated",)"
                                 R"("kf:node-proxiers"])") != std::string::npos);
  CHECK(r.stats.allowed == 1);
  Identity other_proxier = Node("n2");
  other_proxier.groups.push_back("kf:node-proxiers");
  CHECK(r.Ask(other_proxier, slices, 0) == Access::kAllowed);  // The same question: no review.
  CHECK(r.stats.allowed == 1);
  CHECK(r.stats.shared == 2);
  // A node without the group is another question: the probe in its groups, then itself.
  r.up.answer = Http(kDenied);
  CHECK(r.Ask(Node("n3"), slices, 2) == Access::kDenied);
  CHECK(r.up.request.body().find(R"("user":"system:node:n3","groups":["system:nodes",)"
                                 R"("system:authenticated"])") != std::string::npos);
  CHECK(r.stats.denied == 2);
  CHECK(r.stats.shared == 2);
}

}  // namespace
}  // namespace kf::test
