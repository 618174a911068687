#include "proxy/passthrough/coalescing_filter.h"

#include <array>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/await_callback.h"
#include "proxy/passthrough/capturing_response.h"
#include "proxy/upstream/vouched.h"

namespace kf {
namespace {

asio::awaitable<CapturedPtr> WaitFlight(std::shared_ptr<Coalescer::Flight> flight) {
  auto result = co_await AwaitCallback<CapturedPtr>(
      [&flight](std::function<void(CapturedPtr)> done) {
        Coalescer::OnDone(flight, std::move(done));
      },
      std::chrono::seconds(70));  // Past the upstream's own limits.
  co_return result ? *result : nullptr;
}

asio::awaitable<void> WriteCaptured(Exchange& x, const CapturedResponse& shared) {
  ResponseHead head;
  head.status = static_cast<int>(shared.status);
  head.reason = shared.reason;
  head.fields = shared.fields;
  head.framing = ResponseHead::Framing::kLength;
  head.length = shared.body.size();
  const std::array<asio::const_buffer, 1> body{asio::buffer(shared.body)};
  const beast::error_code ec = co_await WriteAnswer(*x.response, std::move(head), body);
  if (ec) x.error = ec.message();
}

}  // namespace

bool CoalescingFilter::Applies(const Exchange& x) {
  const Request& r = x.request;
  return x.route == Route::kPassthrough && r.method == beast::http::verb::get &&
         (r.info.verb == "get" || r.info.verb == "list") && r.body.done();
}

std::optional<std::string> CoalescingFilter::Key(const Request& r,
                                                 const RequestHeaderNames& names) {
  const ClientCertificate* cert = r.client_cert;
  if (cert != nullptr && cert->presented && !cert->verified && !cert->front_proxy) {
    return std::nullopt;  // Whatever it rides on, its answer is nobody else's to have.
  }
  const Vouched who = Vouch(r, names);
  if (who.by == Vouched::By::kRejectedCertificate || who.by == Vouched::By::kNone) {
    return std::nullopt;
  }
  // The fields cannot hold a newline (CoalesceKey), so "\nwho:" ends them.
  return absl::StrCat(CoalesceKey(r.method_string, r.target, r.headers), "\nwho:", who.Key());
}

asio::awaitable<void> CoalescingFilter::Serve(Exchange& x, const Next& next) {
  std::optional<std::string> shared_key;
  if (Applies(x)) shared_key = Key(x.request, names_);
  if (!shared_key) {
    co_await next(x);
    co_return;
  }
  const std::string& key = *shared_key;
  Coalescer::Ticket ticket = coalescer_.Join(key);
  if (ticket.leader) {
    co_await Lead(x, next, key, std::move(ticket));
    co_return;
  }
  CapturedPtr shared = co_await WaitFlight(ticket.flight);
  if (shared && shared->complete) {
    coalescer_.CountCoalesced();
    x.answer = Answer::kCoalesced;
    co_await WriteCaptured(x, *shared);
    co_return;
  }
  co_await next(x);  // The leader's call failed: go upstream alone.
}

asio::awaitable<void> CoalescingFilter::Lead(Exchange& x, const Next& next, const std::string& key,
                                             Coalescer::Ticket ticket) {
  if (ticket.wait_for) {
    co_await WaitFlight(ticket.wait_for);
    coalescer_.Start(key, ticket.flight);
  }
  auto capture = std::make_shared<CapturedResponse>();
  CapturingResponse tee(*x.response, *capture);
  Response* const client = x.response;
  x.response = &tee;
  absl::Cleanup complete = [&] {
    x.response = client;
    coalescer_.Complete(key, ticket.flight, capture->complete ? CapturedPtr(capture) : nullptr);
  };
  co_await next(x);
}

}  // namespace kf
