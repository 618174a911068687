#include "edge/representation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/strings.h"

namespace kf {

bool PrettyUserAgent(std::string_view ua) {
  // apiserver handlers/responsewriters: pretty for curl, wget and browsers.
  for (std::string_view p : {"curl", "Wget", "Mozilla/"}) {
    if (ua.substr(0, p.size()) == p) return true;
  }
  return false;
}

bool ApiserverRendersAnswer(const RequestInfo& info, const boost::beast::http::fields& headers) {
  namespace http = boost::beast::http;
  const std::string accept = absl::AsciiStrToLower(ToAbsl(headers[http::field::accept]));
  if (!accept.empty() && accept.find("application/json") == std::string::npos &&
      accept.find("*/*") == std::string::npos) {
    return true;  // Protobuf-only, YAML, ...
  }
  if (accept.find(";as=") != std::string::npos || accept.find("; as=") != std::string::npos) {
    return true;  // Table, PartialObjectMetadata.
  }
  if (PrettyUserAgent(headers[http::field::user_agent]) || info.query.Has("pretty")) return true;
  for (const auto& f : headers) {
    if (absl::StartsWithIgnoreCase(ToAbsl(f.name_string()), "impersonate-")) return true;
  }
  return false;
}

}  // namespace kf
