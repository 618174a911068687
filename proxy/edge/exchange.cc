#include "proxy/edge/exchange.h"

#include "common/api/status_response.h"

namespace kf {

std::string_view AnswerName(Answer answer) {
  switch (answer) {
    case Answer::kLocal:
      return "local";
    case Answer::kCache:
      return "cache";
    case Answer::kPassthrough:
      return "passthrough";
    case Answer::kTunnel:
      return "tunnel";
    case Answer::kCoalesced:
      return "coalesced";
    case Answer::kRejected:
    case Answer::kCount:
      break;
  }
  return "reject";
}

std::string_view RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kHeaderTooLarge:
      return "header_too_large";
    case Refusal::kBadRequest:
      return "bad_request";
    case Refusal::kHeaderTimeout:
      return "header_timeout";
    case Refusal::kHandshakeQueue:
      return "handshake_queue";
    case Refusal::kTokenReviewUnavailable:
      return "token_review_unavailable";
    case Refusal::kAccessReviewUnavailable:
      return "access_review_unavailable";
    case Refusal::kTokenReviewThrottled:
      return "token_review_throttled";
    case Refusal::kTlsHandshake:
    case Refusal::kCount:
      break;
  }
  return "tls_handshake";
}

asio::awaitable<void> Exchange::Reject(const KubeStatus& status, std::string why) {
  answer = Answer::kRejected;
  error = std::move(why);
  if (auto ec = co_await WriteStatus(*response, status); ec && error.empty()) error = ec.message();
}

RequestInfo ParseRequestInfo(std::string_view method, std::string_view target,
                             absl::Status* parsed) {
  auto info = RequestInfo::Parse(method, target);
  *parsed = info.status();
  return info.ok() ? *std::move(info) : RequestInfo{};
}

asio::awaitable<void> RejectUnparsed(Exchange& x, absl::Status parsed) {
  // Named: a temporary bound to Reject's reference inside co_await is what GCC 12 may free twice.
  const KubeStatus status = ToKubeStatus(parsed);
  co_await x.Reject(status, std::string(parsed.message()));
}

}  // namespace kf
