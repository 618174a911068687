#include "proxy/edge/representation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace kf {

bool PrettyUserAgent(std::string_view ua) {
  // apiserver handlers/responsewriters: pretty for curl, wget and browsers.
  for (std::string_view p : {"curl", "Wget", "Mozilla/"}) {
    if (ua.substr(0, p.size()) == p) return true;
  }
  return false;
}

bool ApiserverRendersAnswer(const RequestInfo&, const boost::beast::http::fields& headers) {
  namespace http = boost::beast::http;
  const std::string accept = absl::AsciiStrToLower(ToAbsl(headers[http::field::accept]));
  if (accept.find(";as=") != std::string::npos || accept.find("; as=") != std::string::npos) {
    return true;  // Table, PartialObjectMetadata.
  }
  for (const auto& f : headers) {
    if (absl::StartsWithIgnoreCase(ToAbsl(f.name_string()), "impersonate-")) return true;
  }
  return false;
}

namespace {

struct Clause {
  std::string type;  // "application/json", "*/*", ...
  double q = 1;
  int specificity = 2;  // 0 "*/*", 1 "x/*", 2 "x/y".
};

std::vector<Clause> ParseAccept(std::string_view accept) {
  std::vector<Clause> out;
  for (absl::string_view part : absl::StrSplit(ToAbsl(accept), ',')) {
    std::vector<absl::string_view> params = absl::StrSplit(part, ';');
    Clause c;
    c.type = absl::AsciiStrToLower(absl::StripAsciiWhitespace(params[0]));
    if (c.type.empty()) continue;
    for (size_t i = 1; i < params.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(params[i]);
      if (absl::ConsumePrefix(&p, "q=")) {
        double q = 1;
        if (absl::SimpleAtod(p, &q)) c.q = q;
      }
    }
    if (c.type == "*/*") {
      c.specificity = 0;
    } else if (absl::EndsWith(c.type, "/*")) {
      c.specificity = 1;
    }
    if (c.q > 0) out.push_back(std::move(c));
  }
  // goautoneg's order (a stable sort for the few clauses clients send): q, then specificity.
  std::stable_sort(out.begin(), out.end(), [](const Clause& a, const Clause& b) {
    if (a.q != b.q) return a.q > b.q;
    return a.specificity > b.specificity;
  });
  return out;
}

}  // namespace

MediaChoice NegotiateMedia(const RequestInfo& info, const boost::beast::http::fields& headers,
                           bool has_protobuf) {
  namespace http = boost::beast::http;
  MediaChoice choice = MediaChoice::kJson;
  const std::string_view accept = headers[http::field::accept];
  if (!absl::StripAsciiWhitespace(ToAbsl(accept)).empty()) {
    choice = MediaChoice::kApiserver;  // No clause a serializer matches: the apiserver's 406.
    for (const Clause& c : ParseAccept(accept)) {
      if (c.type == "application/json" || c.type == "application/*" || c.type == "*/*") {
        choice = MediaChoice::kJson;
        break;
      }
      if (c.type == "application/vnd.kubernetes.protobuf") {
        if (!has_protobuf) continue;
        choice = MediaChoice::kProtobuf;
        break;
      }
      if (c.type == "application/yaml" || c.type == "application/cbor") {
        break;  // A serializer the cache does not hold.
      }
    }
  }
  if (choice == MediaChoice::kJson &&
      (PrettyUserAgent(headers[http::field::user_agent]) || info.query.Has("pretty"))) {
    return MediaChoice::kApiserver;
  }
  return choice;
}

}  // namespace kf
