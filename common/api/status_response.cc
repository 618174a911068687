#include "common/api/status_response.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/api/go_text.h"
#include "common/api/json.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/strings.h"

namespace kf {

StatusMapping MapStatusCode(absl::StatusCode code) {
  // Reasons and codes as k8s.io/apimachinery/pkg/api/errors constructs them.
  switch (code) {
    case absl::StatusCode::kOk:
      return {200, ""};
    case absl::StatusCode::kInvalidArgument:
      return {400, "BadRequest"};
    case absl::StatusCode::kUnauthenticated:
      return {401, "Unauthorized"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "Forbidden"};
    case absl::StatusCode::kNotFound:
      return {404, "NotFound"};
    case absl::StatusCode::kUnimplemented:
      return {405, "MethodNotAllowed"};
    case absl::StatusCode::kAlreadyExists:
      return {409, "AlreadyExists"};
    case absl::StatusCode::kAborted:
      return {409, "Conflict"};
    case absl::StatusCode::kOutOfRange:
      return {410, "Expired"};
    case absl::StatusCode::kFailedPrecondition:
      return {422, "Invalid"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "TooManyRequests"};
    case absl::StatusCode::kUnavailable:
      return {503, "ServiceUnavailable"};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "Timeout"};
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
      return {500, "InternalError"};
    default:
      return {500, "InternalError"};
  }
}

KubeStatus ToKubeStatus(const absl::Status& status) {
  const StatusMapping m = MapStatusCode(status.code());
  KubeStatus out{m.http_code, std::string(m.reason), std::string(status.message()), std::nullopt};
  if (auto payload = status.GetPayload(ToAbsl(kRetryAfterPayload))) {
    int seconds = 0;
    if (absl::SimpleAtoi(std::string(*payload), &seconds)) out.retry_after_seconds = seconds;
  }
  return out;
}

KubeStatus TooManyRequestsStatus(int retry_after_seconds) {
  return {429, "TooManyRequests", "Too many requests, please try again later.",
          retry_after_seconds};
}

KubeStatus RequestTimeoutStatus() {
  KubeStatus status{504, "Timeout", "Timeout: request did not complete within the allotted timeout",
                    std::nullopt};
  status.details_even_if_empty = true;
  return status;
}

KubeStatus NotFoundStatus(std::string_view group, std::string_view resource,
                          std::string_view name) {
  // errors.NewNotFound: fmt.Sprintf("%s %q not found", qualifiedResource, name).
  KubeStatus s{404, "NotFound",
               absl::StrCat(ToAbsl(resource), group.empty() ? "" : ".", ToAbsl(group), " ",
                            GoQuote(name), " not found"),
               std::nullopt};
  s.details_name = std::string(name);
  s.details_group = std::string(group);
  s.details_kind = std::string(resource);
  return s;
}

namespace {

// `"key":"value"` after `into`'s members (omitempty: nothing for an empty value).
void AppendStringMember(std::string* into, std::string_view key, const std::string& value) {
  if (value.empty()) return;
  absl::StrAppend(into, into->empty() ? "" : ",", "\"", ToAbsl(key), "\":", GoJsonString(value));
}

}  // namespace

std::string EncodeStatusJson(const KubeStatus& status) {
  std::string out = absl::StrCat(R"({"kind":"Status","apiVersion":"v1","metadata":{},)",
                                 R"("status":"Failure","message":)", GoJsonString(status.message));
  if (!status.reason.empty()) absl::StrAppend(&out, ",\"reason\":", GoJsonString(status.reason));
  std::string details;
  AppendStringMember(&details, "name", status.details_name);
  AppendStringMember(&details, "group", status.details_group);
  AppendStringMember(&details, "kind", status.details_kind);
  if (!status.causes.empty()) {
    absl::StrAppend(&details, details.empty() ? "" : ",", "\"causes\":[");
    for (size_t i = 0; i < status.causes.size(); ++i) {
      const KubeStatus::Cause& c = status.causes[i];
      std::string cause;
      AppendStringMember(&cause, "reason", c.reason);
      AppendStringMember(&cause, "message", c.message);
      AppendStringMember(&cause, "field", c.field);
      absl::StrAppend(&details, i == 0 ? "{" : ",{", cause, "}");
    }
    absl::StrAppend(&details, "]");
  }
  if (status.retry_after_seconds) {
    absl::StrAppend(&details, details.empty() ? "" : ",",
                    "\"retryAfterSeconds\":", *status.retry_after_seconds);
  }
  if (!details.empty() || status.details_even_if_empty) {
    absl::StrAppend(&out, ",\"details\":{", details, "}");
  }
  absl::StrAppend(&out, ",\"code\":", status.code, "}");
  return out;
}

std::string EncodeStatusBody(const KubeStatus& status) {
  return absl::StrCat(EncodeStatusJson(status), "\n");
}

std::string EncodeStatusProto(const KubeStatus& status) {
  std::string message;
  AppendBytesField(&message, 1, EncodeListMeta("", "", std::nullopt));
  AppendBytesField(&message, 2, "Failure");
  AppendBytesField(&message, 3, status.message);
  AppendBytesField(&message, 4, status.reason);
  if (!status.details_name.empty() || !status.details_group.empty() ||
      !status.details_kind.empty() || !status.causes.empty() || status.retry_after_seconds) {
    std::string details;
    AppendBytesField(&details, 1, status.details_name);
    AppendBytesField(&details, 2, status.details_group);
    AppendBytesField(&details, 3, status.details_kind);
    for (const KubeStatus::Cause& c : status.causes) {
      std::string cause;
      AppendBytesField(&cause, 1, c.reason);
      AppendBytesField(&cause, 2, c.message);
      AppendBytesField(&cause, 3, c.field);
      AppendBytesField(&details, 4, cause);
    }
    AppendVarintField(
        &details, 5,
        static_cast<uint64_t>(static_cast<int64_t>(status.retry_after_seconds.value_or(0))));
    AppendBytesField(&details, 6, "");
    AppendBytesField(&message, 5, details);
  }
  AppendVarintField(&message, 6, static_cast<uint64_t>(static_cast<int64_t>(status.code)));
  return WrapUnknown("v1", "Status", message);
}

}  // namespace kf
