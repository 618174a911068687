#include "upstream/request_header.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace kf {
namespace {

bool AnyEquals(const std::vector<std::string>& names, std::string_view field) {
  for (const auto& n : names) {
    if (absl::EqualsIgnoreCase(n, ToAbsl(field))) return true;
  }
  return false;
}

// Go's url.PathEscape: unreserved characters and the path segment's allowed sub-delimiters
// stay; everything else becomes %XX. Header names cannot carry all of those, so only the
// characters a field name allows (RFC 9110 tchar) stay here; the apiserver unescapes either.
std::string EscapeExtraKey(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

bool RequestHeaderNames::Names(std::string_view field) const {
  if (AnyEquals(username, field) || AnyEquals(group, field) || AnyEquals(uid, field)) return true;
  for (const auto& p : extra_prefix) {
    if (!p.empty() && absl::StartsWithIgnoreCase(ToAbsl(field), p)) return true;
  }
  return false;
}

void RequestHeaderNames::Strip(boost::beast::http::fields& fields) const {
  for (auto it = fields.begin(); it != fields.end();) {
    if (Names(it->name_string())) {
      it = fields.erase(it);
    } else {
      ++it;
    }
  }
}

void RequestHeaderNames::Assert(const Identity& user, boost::beast::http::fields& fields) const {
  if (!username.empty()) fields.set(username.front(), user.username);
  if (!group.empty()) {
    for (const auto& g : user.groups) fields.insert(group.front(), g);
  }
  if (!uid.empty() && !user.uid.empty()) fields.set(uid.front(), user.uid);
  if (!extra_prefix.empty()) {
    for (const auto& [key, values] : user.extra) {
      const std::string name = absl::StrCat(extra_prefix.front(), EscapeExtraKey(key));
      for (const auto& v : values) fields.insert(name, v);
    }
  }
}

}  // namespace kf
