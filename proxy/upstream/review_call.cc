#include "proxy/upstream/review_call.h"

#include <algorithm>

namespace kf {

ReviewFailure ClassifyReviewCall(const absl::StatusOr<UpstreamResponse>& res) {
  if (!res.ok()) return ReviewFailure::kUnavailable;  // Unreachable, lost, timed out.
  const int status = res->status;
  if (status == 200 || status == 201) return ReviewFailure::kNone;
  // The apiserver's overload (APF's 429, a 503 or 504 of its own or of a proxy in front) or
  // failure: asking it to serve the request itself would only add to it.
  if (status == 429 || status >= 500) return ReviewFailure::kUnavailable;
  return ReviewFailure::kRefused;  // 401, 403 (no system:auth-delegator), 404, ...
}

asio::awaitable<ReviewReply> PostReview(UpstreamPool& pool, ReviewSlots& slots, std::string target,
                                        std::string authorization, std::string body) {
  const auto deadline = std::chrono::steady_clock::now() + slots.timeout;
  auto permit = co_await slots.slots.TryAcquire(deadline, slots.max_waiting);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (!permit || left.count() <= 0) co_return ReviewReply{ReviewFailure::kUnavailable, {}};
  auto res = co_await UpstreamCall(pool, http::verb::post, target, authorization, body, left);
  // A 502 or 503 is a proxy's (or a kube-fanout tier's) word that the apiserver was not reached,
  // e.g. a pooled connection closed under it: asked once more, as a review changes nothing.
  // Not after a 429 (the apiserver asked for less), a timeout, or past the deadline.
  if (res.ok() && (res->status == 502 || res->status == 503)) {
    const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (rest.count() > 0) {
      auto again = co_await UpstreamCall(pool, http::verb::post, std::move(target),
                                         std::move(authorization), std::move(body), rest);
      res = std::move(again);
    }
  }
  ReviewReply reply{ClassifyReviewCall(res), {}};
  if (reply.failure == ReviewFailure::kNone) reply.body = std::move(res->body);
  co_return reply;
}

}  // namespace kf
