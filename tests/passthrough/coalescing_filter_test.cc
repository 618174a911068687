#include "passthrough/coalescing_filter.h"

#include <catch2/catch.hpp>

#include "tests/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kTarget = "/api/v1/namespaces/ns/configmaps";

// One reader of kTarget going through the filter; its upstream call (`next`) answers `body`
// with a Content-Length, or nothing at all when `body` is empty (a failed call).
struct Reader : FilterCall {
  explicit Reader(std::string answer) : FilterCall(http::verb::get, std::string(kTarget)) {
    r.fields.set(http::field::authorization, "Bearer t");
    body = std::move(answer);
    probe.then = [this](Exchange& e) { return Respond(e, body); };
  }
  static asio::awaitable<void> Respond(Exchange& e, const std::string& body) {
    if (body.empty()) co_return;
    ResponseHead head;
    head.status = 200;
    head.fields.set(http::field::content_type, "application/json");
    head.fields.set("Audit-Id", "a1");
    head.fields.set(http::field::content_length, std::to_string(body.size()));
    head.framing = ResponseHead::Framing::kLength;
    head.length = body.size();
    const std::array<asio::const_buffer, 1> piece{asio::buffer(body)};
    co_await e.response->WriteHead(std::move(head));
    co_await e.response->WriteBody(piece);
    co_await e.response->End();
  }
  std::string body;
};

// A call of the same key already on its way upstream, so that the readers under test join the
// next one; Land() ends it without an answer to share.
struct CallUnderWay {
  CallUnderWay(Coalescer& c, const TestRequest& r)
      : coalescer(c),
        key(CoalesceKey(r.request.method_string, r.request.target, r.request.headers)),
        ticket(c.Join(key)) {}
  void Land() { coalescer.Complete(key, ticket.flight, nullptr); }
  Coalescer& coalescer;
  std::string key;
  Coalescer::Ticket ticket;
};

// While a call of their key is under way, `leader` arrives, then `follower`; then that call
// lands and both are served to the end.
void LeadAndFollow(asio::io_context& ioc, CoalescingFilter& filter, Coalescer& coalescer,
                   Reader& leader, Reader& follower) {
  CallUnderWay earlier(coalescer, leader.r);
  REQUIRE(earlier.ticket.leader);
  const auto led = Spawn(ioc, filter.Serve(leader.x, leader.next));
  ioc.poll();
  const auto followed = Spawn(ioc, filter.Serve(follower.x, follower.next));
  ioc.poll();
  CHECK(leader.probe.calls == 0);  // Waits for the call under way: never joins it.
  earlier.Land();
  REQUIRE(RunUntil(ioc, [&] { return led.finished() && followed.finished(); }));
  led.Rethrow();
  followed.Rethrow();
}

TEST_CASE("CoalescingFilter gives a follower the leader's captured answer") {
  asio::io_context ioc;
  Coalescer coalescer;
  CoalescingFilter filter(coalescer);
  Reader leader("{\"items\":[1]}");
  Reader follower("{\"items\":[\"follower went upstream\"]}");
  LeadAndFollow(ioc, filter, coalescer, leader, follower);

  CHECK(leader.probe.calls == 1);
  CHECK(leader.x.answer == Answer::kPassthrough);
  CHECK(leader.resp.body == "{\"items\":[1]}");
  CHECK(leader.x.response == &leader.resp);  // The capturing wrapper is gone again.

  CHECK(follower.probe.calls == 0);
  CHECK(follower.x.answer == Answer::kCoalesced);
  REQUIRE(follower.resp.head.has_value());
  CHECK(follower.resp.head->status == 200);
  CHECK(follower.resp.head->fields["Audit-Id"] == "a1");
  CHECK(follower.resp.head->fields[http::field::content_type] == "application/json");
  CHECK(follower.resp.head->framing == ResponseHead::Framing::kLength);
  CHECK(follower.resp.head->length == leader.resp.body.size());
  CHECK(follower.resp.body == leader.resp.body);
  CHECK(follower.resp.ended);
  CHECK(coalescer.coalesced() == 1);
}

TEST_CASE("CoalescingFilter sends a follower upstream alone when its leader's call failed") {
  asio::io_context ioc;
  Coalescer coalescer;
  CoalescingFilter filter(coalescer);
  Reader leader("");  // No answer: the capture is incomplete.
  Reader follower("{\"items\":[2]}");
  LeadAndFollow(ioc, filter, coalescer, leader, follower);

  CHECK(leader.probe.calls == 1);
  CHECK(follower.probe.calls == 1);
  CHECK(follower.x.answer == Answer::kPassthrough);
  CHECK(follower.resp.body == "{\"items\":[2]}");
  CHECK(coalescer.coalesced() == 0);
}

TEST_CASE("CoalescingFilter lets writes, watches and cache routes by without joining") {
  asio::io_context ioc;
  Coalescer coalescer;
  CoalescingFilter filter(coalescer);
  FilterCall post(http::verb::post, std::string(kTarget));
  FilterCall watch(http::verb::get, std::string(kTarget) + "?watch=1");
  FilterCall cached(http::verb::get, std::string(kTarget));
  cached.x.route = Route::kCache;
  FilterCall bodied(http::verb::get, std::string(kTarget));
  bodied.r.body.Set("{}");
  for (FilterCall* c : {&post, &watch, &cached, &bodied}) {
    CHECK_FALSE(CoalescingFilter::Applies(c->x));
    Run(ioc, filter.Serve(c->x, c->next));
    CHECK(c->probe.calls == 1);
    CHECK(c->x.response == &c->resp);
  }
  FilterCall list(http::verb::get, std::string(kTarget));
  CHECK(CoalescingFilter::Applies(list.x));
}

}  // namespace
}  // namespace kf::test
