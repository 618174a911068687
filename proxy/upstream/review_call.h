// ReviewCall: one TokenReview or SubjectAccessReview on its way to the apiserver, made with
// kube-fanout's own credentials, and what became of it when the apiserver did not answer it.
//
// The failures fall in two kinds, and a cached read treats them differently:
//
// - refused: the apiserver answered the call, but not with a review: 401 or 403 (kube-fanout
//   lacks system:auth-delegator), another 4xx, or a 2xx that does not read. Only the apiserver
//   can judge the request then: it passes through, and gets the apiserver's own answer.
// - unavailable: no answer in time: the upstream unreachable or the connection lost, the call
//   past ReviewSlots::timeout (its turn for a slot included), the apiserver overloaded (429,
//   5xx), or ReviewSlots::max_waiting reviews already waiting for a slot. Passing the request
//   through would turn an overload of kube-fanout (or of the apiserver) into more load on the
//   apiserver: the client is answered 429 with Retry-After instead, and tries again.
//
// One ReviewSlots per worker thread, shared by its Authenticator and AccessReview; not
// thread-safe.
#ifndef KUBE_FANOUT_UPSTREAM_REVIEW_CALL_H_
#define KUBE_FANOUT_UPSTREAM_REVIEW_CALL_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "common/async_semaphore.h"
#include "proxy/upstream/upstream_client.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

enum class ReviewFailure {
  kNone,         // The apiserver answered the review (2xx, read).
  kRefused,      // The apiserver answered, but not with a review: the request passes through.
  kUnavailable,  // No answer (see above): the request is answered 429.
};

// What an answer to a review call (or its absence) is, before its body is read: kNone for a
// 200 or 201 (the review's answer, to be read), else the failure.
ReviewFailure ClassifyReviewCall(const absl::StatusOr<UpstreamResponse>& res);

// The bound on a worker thread's reviews.
struct ReviewSlots {
  // Reviews on their way to the apiserver at once (more wait their turn, in arrival order).
  static constexpr size_t kInFlight = 32;
  // Reviews waiting for a slot, past which a new one is unavailable at once: 32 rounds of the
  // slots. A wait longer than that would outlast the timeout whenever a round (one review per
  // slot) takes more than about 300 ms, as it does when the apiserver is too busy to answer.
  static constexpr size_t kMaxWaiting = 1024;
  // A review's whole time from when it is wanted, its wait for a slot included: the timeout of
  // the apiserver's own delegated authentication and authorization clients (10 s).
  static constexpr std::chrono::milliseconds kTimeout{10000};

  explicit ReviewSlots(size_t in_flight = kInFlight, size_t waiting = kMaxWaiting,
                       std::chrono::milliseconds t = kTimeout)
      : slots(in_flight), max_waiting(waiting), timeout(t) {}

  AsyncSemaphore slots;
  size_t max_waiting;
  std::chrono::milliseconds timeout;
};

struct ReviewReply {
  ReviewFailure failure = ReviewFailure::kNone;
  std::string body;  // The review's answer when failure is kNone.
};

// POSTs `body` to `target` with `authorization`, once a slot of `slots` is free, all within
// slots.timeout, a new connection's dial included.
asio::awaitable<ReviewReply> PostReview(UpstreamPool& pool, ReviewSlots& slots, std::string target,
                                        std::string authorization, std::string body);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_REVIEW_CALL_H_
