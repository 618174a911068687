// StatusResponse: the one table that turns an absl::Status into an HTTP status code and a
// Kubernetes `Status` body (k8s.io/apimachinery/pkg/api/errors), so every error kube-fanout
// answers by itself looks like the apiserver's. Value types; thread-compatible.
#ifndef KUBE_FANOUT_COMMON_API_STATUS_RESPONSE_H_
#define KUBE_FANOUT_COMMON_API_STATUS_RESPONSE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace kf {

struct KubeStatus {
  int code = 500;      // HTTP status code, also the body's "code".
  std::string reason;  // metav1.StatusReason, e.g. "NotFound"; empty for none.
  std::string message;
  std::optional<int> retry_after_seconds;  // details.retryAfterSeconds and Retry-After.
  // details.name, .group, .kind (metav1.StatusDetails), each omitted when empty.
  std::string details_name, details_group, details_kind;
  struct Cause {  // metav1.StatusCause: details.causes[].
    std::string reason, message, field;
  };
  std::vector<Cause> causes;
  bool details_even_if_empty = false;  // "details":{} (Go: a non-nil, zero StatusDetails).
};

// The apiserver's NotFound for an object of a resource (errors.NewNotFound):
// 404, `<resource>[.<group>] <name as Go's %q> not found`, details {name, group, kind: resource}.
KubeStatus NotFoundStatus(std::string_view group, std::string_view resource, std::string_view name);

// kube-fanout's answer to a request it has no room for (admission, the passthrough and watch
// caps): 429 TooManyRequests, `Too many requests, please try again later.` (the apiserver's
// max-in-flight and APF text, there plain text), details.retryAfterSeconds and Retry-After.
KubeStatus TooManyRequestsStatus(int retry_after_seconds);

// The apiserver's answer when its request timeout passes while a request body is still being
// read (filters/timeout.go: NewTimeoutError(..., 0)): 504 Timeout, "details":{}.
KubeStatus RequestTimeoutStatus();

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

// The JSON object, byte-compatible with the apiserver's (Go's encoder: compact, field order kind,
// apiVersion, metadata, status, message, reason, details, code; strings escaped as Go escapes
// them, so nothing in a message or name can leave its string). No trailing newline: for
// embedding (a watch ERROR event's object).
std::string EncodeStatusJson(const KubeStatus& status);
// The response body: the object and the newline Go's encoder ends it with.
std::string EncodeStatusBody(const KubeStatus& status);
// The same Status in protobuf: its envelope (common/api/kube_proto.h) around metav1.Status's
// message, with details when the JSON form has them. A response body, or a watch ERROR
// event's object.
std::string EncodeStatusProto(const KubeStatus& status);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_STATUS_RESPONSE_H_
