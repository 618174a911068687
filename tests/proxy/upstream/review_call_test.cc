#include "proxy/upstream/review_call.h"

#include <catch2/catch.hpp>

#include "proxy/upstream/access_review.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

using std::chrono::milliseconds;

absl::StatusOr<UpstreamResponse> Answered(int status) { return UpstreamResponse{status, "", ""}; }

TEST_CASE("A review call is unavailable without an answer, refused when the apiserver says no") {
  CHECK(ClassifyReviewCall(Answered(201)) == ReviewFailure::kNone);
  CHECK(ClassifyReviewCall(Answered(200)) == ReviewFailure::kNone);
  // The apiserver refused kube-fanout the review: it answered; the request passes through.
  CHECK(ClassifyReviewCall(Answered(401)) == ReviewFailure::kRefused);
  CHECK(ClassifyReviewCall(Answered(403)) == ReviewFailure::kRefused);
  CHECK(ClassifyReviewCall(Answered(404)) == ReviewFailure::kRefused);
  // No answer: unreachable, timed out, overloaded or failing.
  CHECK(ClassifyReviewCall(absl::UnavailableError("upstream: connection refused")) ==
        ReviewFailure::kUnavailable);
  CHECK(ClassifyReviewCall(absl::DeadlineExceededError("timeout")) == ReviewFailure::kUnavailable);
  CHECK(ClassifyReviewCall(Answered(429)) == ReviewFailure::kUnavailable);
  CHECK(ClassifyReviewCall(Answered(500)) == ReviewFailure::kUnavailable);
  CHECK(ClassifyReviewCall(Answered(503)) == ReviewFailure::kUnavailable);
  CHECK(ClassifyReviewCall(Answered(504)) == ReviewFailure::kUnavailable);
}

constexpr std::string_view kAllowed = R"({"kind":"SubjectAccessReview","status":{"allowed":true}})";

std::string Http(std::string_view status_line, std::string_view body) {
  return std::string(status_line) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + std::string(body);
}

// The head and part of the body, then nothing for a second (a stalled apiserver), then the end.
constexpr std::string_view kStalled = "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{";

asio::awaitable<void> PostInto(UpstreamPool& pool, ReviewSlots& slots, std::string target,
                               std::optional<ReviewReply>& out) {
  ReviewReply reply = co_await PostReview(pool, slots, std::move(target), "", "{}");
  out = std::move(reply);
}

TEST_CASE("A review whose answer stalls is unavailable after the slots' timeout") {
  asio::io_context ioc;
  FakeUpstream up{ioc};
  up.answer = kStalled;
  up.hold = std::chrono::seconds(1);
  ReviewSlots slots(4, 4, milliseconds(200));
  const Spawned server = Spawn(ioc, FakeUpstream::ServeOne(&up));
  const auto start = std::chrono::steady_clock::now();
  const ReviewReply reply = Run(ioc, PostReview(up.pool, slots, "/r", "", "{}"));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(reply.failure == ReviewFailure::kUnavailable);
  CHECK(took >= milliseconds(150));
  CHECK(took < std::chrono::seconds(3));
  CHECK(up.request.target() == "/r");  // It was sent.
  CHECK(RunUntil(ioc, [&] { return server.finished(); }));
}

TEST_CASE("A review past the waiting bound is unavailable at once, without being sent") {
  asio::io_context ioc;
  FakeUpstream up{ioc};
  up.answer = kStalled;
  up.hold = std::chrono::seconds(1);
  ReviewSlots slots(1, 0, std::chrono::seconds(30));
  const Spawned server = Spawn(ioc, FakeUpstream::ServeOne(&up));
  // The one slot is taken by a review the upstream is slow to answer.
  std::optional<ReviewReply> first;
  Spawn(ioc, PostInto(up.pool, slots, "/first", first));
  REQUIRE(RunUntil(ioc, [&] { return up.request.target() == "/first"; }));
  const auto start = std::chrono::steady_clock::now();
  const ReviewReply second = Run(ioc, PostReview(up.pool, slots, "/second", "", "{}"));
  CHECK(second.failure == ReviewFailure::kUnavailable);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  CHECK_FALSE(first.has_value());  // Still waiting for its answer.
  // The upstream ends the answer short: the first review fails too, as unavailable.
  REQUIRE(RunUntil(ioc, [&] { return first.has_value() && server.finished(); }));
  CHECK(first->failure == ReviewFailure::kUnavailable);
}

TEST_CASE(
    "A review's bound covers the dial of a new connection, and the next one dials elsewhere") {
  asio::io_context ioc;
  // Connections complete in the kernel's listen queue, and nothing ever answers their TLS
  // handshake: a dial that would take its whole 10 s.
  asio::ip::tcp::acceptor silent(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  FakeUpstream good{ioc};
  good.answer = Http("HTTP/1.1 201 Created", kAllowed);
  UpstreamConfig config;
  config.endpoints = {
      UpstreamEndpoint{.tls = true, .host = "127.0.0.1", .port = silent.local_endpoint().port()},
      good.config.endpoints[0]};
  config.insecure_skip_tls_verify = true;
  asio::ssl::context tls{asio::ssl::context::tls_client};
  UpstreamPool pool(ioc, config, tls, std::chrono::seconds(10));
  ReviewSlots slots(4, 4, milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  const ReviewReply reply = Run(ioc, PostReview(pool, slots, "/r", "", "{}"));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(reply.failure == ReviewFailure::kUnavailable);
  CHECK(took < std::chrono::seconds(2));  // Its 200 ms, not the dial timeout's 10 s.
  // The next review starts with the other endpoint.
  const Spawned server = Spawn(ioc, FakeUpstream::ServeOne(&good));
  const ReviewReply next = Run(ioc, PostReview(pool, slots, "/r", "", "{}"));
  CHECK(next.failure == ReviewFailure::kNone);
  CHECK(next.body == kAllowed);
}

// An AccessReview whose reviews go to a fake upstream answering `answer` once.
struct Reviews {
  explicit Reviews(std::string answer) { up.answer = std::move(answer); }
  Access Ask(const char* target) {
    Spawn(ioc, FakeUpstream::ServeOne(&up));
    auto info = RequestInfo::Parse("GET", target);
    REQUIRE(info.ok());
    return Run(ioc, access.Allowed(up.pool, Vouched::By::kToken,
                                   Identity{"alice", {"system:authenticated"}}, *info));
  }
  asio::io_context ioc;
  FakeUpstream up{ioc};
  ReviewStats stats;
  ReviewSlots slots{4, 4, milliseconds(500)};
  AccessAnswers answers{100, ""};
  AccessReview access{CacheSettings{}, stats, slots, [] { return std::string("Bearer own"); },
                      answers};
};

TEST_CASE("AccessReview: allowed, denied (passed through), or unavailable (answered 429)") {
  Reviews allowed(Http("HTTP/1.1 201 Created", kAllowed));
  CHECK(allowed.Ask("/api/v1/pods") == Access::kAllowed);
  CHECK(allowed.stats.allowed == 1);

  // kube-fanout may not review (no system:auth-delegator): the apiserver answers the request.
  Reviews refused(Http("HTTP/1.1 403 Forbidden", "{}"));
  CHECK(refused.Ask("/api/v1/pods") == Access::kDenied);
  CHECK(refused.stats.errors == 1);

  // The apiserver failing to review: unavailable, and the narrower question (a namespace's
  // pods after all pods) is not asked: it would wait as long. (A 502 or 503 is asked once more
  // first: a proxy's word that the apiserver was not reached.)
  Reviews busy(Http("HTTP/1.1 500 Internal Server Error", "{}"));
  CHECK(busy.Ask("/api/v1/namespaces/ns/pods") == Access::kUnavailable);
  CHECK(busy.stats.errors == 1);
  CHECK(busy.up.request.body().find(R"("namespace":"")") != std::string::npos);

  // Nothing cached from a failure: the next ask is a review again.
  busy.up.answer = Http("HTTP/1.1 201 Created", kAllowed);
  CHECK(busy.Ask("/api/v1/namespaces/ns/pods") == Access::kAllowed);
  CHECK(busy.stats.allowed == 1);
}

}  // namespace
}  // namespace kf::test
