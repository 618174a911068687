#include "proxy/filters/event_spam_gate.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/api/kube_proto.h"
#include "common/strings.h"

namespace kf {
namespace {

// The apiserver refuses request bodies over 3 MiB (MaxRequestBodyBytes).
constexpr size_t kMaxEventBody = 3u << 20;

// The encoding the apiserver decodes the body in: its Content-Type's media type (no
// parameters, any case), as its negotiation reads it.
ratelimit::EventSpamFilter::Encoding BodyEncoding(const Request& request) {
  absl::string_view type = ToAbsl(request.headers[beast::http::field::content_type]);
  type = absl::StripAsciiWhitespace(type.substr(0, type.find(';')));
  return absl::EqualsIgnoreCase(type, ToAbsl(kProtobufContentType))
             ? ratelimit::EventSpamFilter::Encoding::kProtobuf
             : ratelimit::EventSpamFilter::Encoding::kJson;
}

}  // namespace

asio::awaitable<void> EventSpamGate::Serve(Exchange& x, const Next& next) {
  if (!x.request.info.IsEventCreation() || !x.user) {
    co_await next(x);
    co_return;
  }
  beast::error_code error;
  auto body = co_await ReadWholeBody(x.request.body, kMaxEventBody, &error);
  if (!body && error == beast::error::timeout) {
    // The apiserver's answer when its request timeout passes while the body is read
    // (filters/timeout.go: NewTimeoutError(..., 0)).
    x.response->CloseAfter();
    const KubeStatus status = RequestTimeoutStatus();
    co_await x.Reject(status, "event body not sent in time");
    co_return;
  }
  if (!body) {
    x.response->CloseAfter();
    const KubeStatus status{413, "RequestEntityTooLarge", "Request entity too large", std::nullopt};
    co_await x.Reject(status, "event body too large or unreadable");
    co_return;
  }
  if (!filter_.Allow(x.user->username, *body, std::chrono::steady_clock::now(),
                     BodyEncoding(x.request))) {
    KubeStatus status{429, "TooManyRequests",
                      "Too many events from this source about this object, please try again "
                      "later.",
                      300};
    co_await x.Reject(status, "event spam filter");
    co_return;
  }
  x.request.whole_body = std::move(body);
  co_await next(x);
}

}  // namespace kf
