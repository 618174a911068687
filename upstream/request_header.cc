#include "upstream/request_header.h"

#include <algorithm>

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

// Go's url.PathUnescape: %XX to its byte; false on a malformed escape.
bool UnescapeExtraKey(absl::string_view in, std::string* out) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size() || !absl::ascii_isxdigit(in[i + 1]) ||
        !absl::ascii_isxdigit(in[i + 2])) {
      return false;
    }
    const auto hex = [](char c) {
      return absl::ascii_isdigit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
    };
    *out += static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2]));
    i += 2;
  }
  return true;
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

std::optional<Identity> RequestHeaderNames::Read(const boost::beast::http::fields& fields) const {
  const auto first = [&fields](const std::vector<std::string>& names) {
    for (const auto& n : names) {
      for (auto it = fields.find(n);
           it != fields.end() && absl::EqualsIgnoreCase(ToAbsl(it->name_string()), n); ++it) {
        if (!it->value().empty()) return std::string(it->value());
      }
    }
    return std::string();
  };
  Identity user;
  user.username = first(username);
  if (user.username.empty()) return std::nullopt;
  user.uid = first(uid);
  for (const auto& f : fields) {
    const absl::string_view name = ToAbsl(f.name_string());
    if (AnyEquals(group, f.name_string())) user.groups.emplace_back(f.value());
    for (const auto& p : extra_prefix) {
      if (p.empty() || !absl::StartsWithIgnoreCase(name, p)) continue;
      std::string key;
      if (!UnescapeExtraKey(name.substr(p.size()), &key)) break;
      key = absl::AsciiStrToLower(key);
      auto it = std::find_if(user.extra.begin(), user.extra.end(),
                             [&key](const auto& e) { return e.first == key; });
      if (it == user.extra.end()) it = user.extra.insert(user.extra.end(), {key, {}});
      it->second.emplace_back(f.value());
      break;
    }
  }
  std::sort(user.extra.begin(), user.extra.end());
  return user;
}

const RequestHeaderNames& DefaultRequestHeaderNames() {
  static const auto* names = new RequestHeaderNames();
  return *names;
}

std::optional<Identity> VouchedUser(const Request& r, const RequestHeaderNames& names) {
  const ClientCertificate* cert = r.client_cert;
  if (cert == nullptr) return std::nullopt;
  if (cert->front_proxy) {
    if (auto user = names.Read(r.headers)) return user;
  }
  if (cert->authenticates()) return cert->user;
  return std::nullopt;
}

}  // namespace kf
