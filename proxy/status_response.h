// StatusResponse: the one table that turns an absl::Status into an HTTP status code and a
// Kubernetes `Status` body (k8s.io/apimachinery/pkg/api/errors), so every error kube-fanout
// answers by itself looks like the apiserver's. Value types; thread-compatible.
#ifndef KUBE_FANOUT_PROXY_STATUS_RESPONSE_H_
#define KUBE_FANOUT_PROXY_STATUS_RESPONSE_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kf {

struct KubeStatus {
  int code = 500;      // HTTP status code, also the body's "code".
  std::string reason;  // metav1.StatusReason, e.g. "NotFound"; empty for none.
  std::string message;
  std::optional<int> retry_after_seconds;  // details.retryAfterSeconds and Retry-After.
};

// The row of the table for `code`: HTTP status and reason.
struct StatusMapping {
  int http_code;
  std::string_view reason;
};
StatusMapping MapStatusCode(absl::StatusCode code);

// A KubeStatus for a non-OK status: message is the status message; a payload under
// kRetryAfterPayload ("1", "5", ...) becomes retry_after_seconds.
KubeStatus ToKubeStatus(const absl::Status& status);
inline constexpr std::string_view kRetryAfterPayload = "kube-fanout/retry-after-seconds";

// The JSON body, byte-compatible with the apiserver's (Go's encoder: compact, field order kind,
// apiVersion, metadata, status, message, reason, details, code; trailing newline).
std::string EncodeStatusBody(const KubeStatus& status);

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_STATUS_RESPONSE_H_
