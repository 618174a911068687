#include "upstream/review_call.h"

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
  auto res = co_await UpstreamCall(pool, http::verb::post, std::move(target),
                                   std::move(authorization), std::move(body), left);
  ReviewReply reply{ClassifyReviewCall(res), {}};
  if (reply.failure == ReviewFailure::kNone) reply.body = std::move(res->body);
  co_return reply;
}

}  // namespace kf
