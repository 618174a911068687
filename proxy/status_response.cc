#include "proxy/status_response.h"

#include "absl/strings/numbers.h"
#include "common/strings.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

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

std::string EncodeStatusBody(const KubeStatus& status) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("Status");
  w.Key("apiVersion");
  w.String("v1");
  w.Key("metadata");
  w.StartObject();
  w.EndObject();
  w.Key("status");
  w.String("Failure");
  w.Key("message");
  w.String(status.message.data(), static_cast<rapidjson::SizeType>(status.message.size()));
  if (!status.reason.empty()) {
    w.Key("reason");
    w.String(status.reason.data(), static_cast<rapidjson::SizeType>(status.reason.size()));
  }
  if (status.retry_after_seconds) {
    w.Key("details");
    w.StartObject();
    w.Key("retryAfterSeconds");
    w.Int(*status.retry_after_seconds);
    w.EndObject();
  }
  w.Key("code");
  w.Int(status.code);
  w.EndObject();
  // Go's encoder escapes <, > and & (and U+2028/2029) inside strings; outside strings these
  // bytes cannot occur in this document, so a plain pass over the output is exact.
  std::string body;
  body.reserve(buf.GetSize() + 1);
  const std::string_view raw(buf.GetString(), buf.GetSize());
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '<') {
      body += "\\u003c";
    } else if (c == '>') {
      body += "\\u003e";
    } else if (c == '&') {
      body += "\\u0026";
    } else if (c == '\xe2' && raw.substr(i, 2) == "\xe2\x80" && i + 2 < raw.size() &&
               (raw[i + 2] == '\xa8' || raw[i + 2] == '\xa9')) {
      body += raw[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      body.push_back(c);
    }
  }
  body.push_back('\n');
  return body;
}

}  // namespace kf
