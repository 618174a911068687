#include "proxy/edge/hop_by_hop.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace kf {
namespace http = boost::beast::http;
namespace {

constexpr std::string_view kHopByHop[] = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
};

std::vector<std::string> ConnectionTokens(const http::fields& fields) {
  std::vector<std::string> tokens;
  for (auto it = fields.find(http::field::connection);
       it != fields.end() && it->name() == http::field::connection; ++it) {
    for (absl::string_view t : absl::StrSplit(ToAbsl(it->value()), ',')) {
      t = absl::StripAsciiWhitespace(t);
      if (!t.empty()) tokens.push_back(absl::AsciiStrToLower(t));
    }
  }
  return tokens;
}

}  // namespace

bool ConnectionHasToken(const http::fields& fields, std::string_view token) {
  for (const std::string& t : ConnectionTokens(fields)) {
    if (absl::EqualsIgnoreCase(t, ToAbsl(token))) return true;
  }
  return false;
}

void CopyEndToEndFields(const http::fields& from, http::fields& to) {
  const std::vector<std::string> named = ConnectionTokens(from);
  for (const auto& f : from) {
    const std::string name = absl::AsciiStrToLower(ToAbsl(f.name_string()));
    bool drop = false;
    for (std::string_view h : kHopByHop) drop = drop || name == h;
    for (const std::string& n : named) drop = drop || name == n;
    if (name == "expect" &&
        absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(ToAbsl(f.value())), "100-continue")) {
      drop = true;
    }
    if (!drop) to.insert(f.name_string(), f.value());
  }
}

bool IsUpgradeRequest(const http::fields& fields) {
  return fields.count(http::field::upgrade) > 0 && ConnectionHasToken(fields, "upgrade");
}

}  // namespace kf
