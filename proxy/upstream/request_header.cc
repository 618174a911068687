#include "proxy/upstream/request_header.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "proxy/edge/field_syntax.h"

namespace kf {
namespace {

bool AnyEquals(const std::vector<std::string>& names, std::string_view field) {
  for (const auto& n : names) {
    if (absl::EqualsIgnoreCase(n, ToAbsl(field))) return true;
  }
  return false;
}

// The bytes url.PathEscape leaves as they are, less what a field name cannot hold (':', '@',
// '=') and upper-case letters: the apiserver lowercases a key before unescaping it, so an
// upper-case letter survives only escaped. Everything else is %XX, which url.PathUnescape
// reads back; the key the apiserver sees is the key asserted.
std::string EscapeExtraKey(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.' ||
        c == '~' || c == '$' || c == '&' || c == '+') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Go's url.PathUnescape: %XX to its byte, '+' left alone; false on a malformed escape.
bool UnescapeExtraKey(std::string_view in, std::string* out) {
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

// Go's h.Get(name): the first value of the field (case-insensitive names, as Go's canonical
// keys), or nothing.
std::optional<std::string_view> FirstValue(const boost::beast::http::fields& fields,
                                           std::string_view name) {
  for (const auto& f : fields) {
    if (absl::EqualsIgnoreCase(ToAbsl(f.name_string()), ToAbsl(name))) return f.value();
  }
  return std::nullopt;
}

// requestheader.go's headerValue: the first non-empty h.Get of the names, in order.
std::string FirstNonEmpty(const boost::beast::http::fields& fields,
                          const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (auto v = FirstValue(fields, n); v && !v->empty()) return std::string(*v);
  }
  return std::string();
}

// requestheader.go's newExtra for one prefix: each field name (Go's map key: names equal but
// for case are one) taken once, with all its values in order.
void ReadExtra(const boost::beast::http::fields& fields, std::string_view prefix,
               std::vector<std::pair<std::string, std::vector<std::string>>>& extra) {
  std::vector<std::string> done;  // Lowercased names already read.
  for (const auto& f : fields) {
    const std::string_view name = f.name_string();
    if (!absl::StartsWithIgnoreCase(ToAbsl(name), ToAbsl(prefix))) continue;
    std::string lower = absl::AsciiStrToLower(ToAbsl(name));
    if (std::find(done.begin(), done.end(), lower) != done.end()) continue;
    // unescapeExtraKey(strings.ToLower(headerName[len(prefix):])).
    const std::string escaped = lower.substr(prefix.size());
    done.push_back(std::move(lower));
    std::string key;
    if (!UnescapeExtraKey(escaped, &key)) key = escaped;
    auto it =
        std::find_if(extra.begin(), extra.end(), [&key](const auto& e) { return e.first == key; });
    if (it == extra.end()) it = extra.insert(extra.end(), {key, {}});
    for (const auto& g : fields) {
      if (absl::EqualsIgnoreCase(ToAbsl(g.name_string()), ToAbsl(name))) {
        it->second.emplace_back(g.value());
      }
    }
  }
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

absl::Status RequestHeaderNames::Assert(const Identity& user,
                                        boost::beast::http::fields& fields) const {
  if (username.empty()) return absl::InvalidArgumentError("no request-header user field");
  if (user.username.empty()) return absl::InvalidArgumentError("no user name to assert");
  if (absl::Status s = CheckIdentity(user); !s.ok()) return s;
  // Everything is built and checked before the first field is written: all or nothing.
  std::vector<std::pair<std::string, std::string_view>> out;
  out.emplace_back(username.front(), user.username);
  if (!group.empty()) {
    for (const auto& g : user.groups) out.emplace_back(group.front(), g);
  }
  if (!uid.empty() && !user.uid.empty()) out.emplace_back(uid.front(), user.uid);
  if (!extra_prefix.empty()) {
    for (const auto& [key, values] : user.extra) {
      std::string name = absl::StrCat(extra_prefix.front(), EscapeExtraKey(key));
      for (const auto& v : values) out.emplace_back(name, v);
    }
  }
  for (const auto& [name, value] : out) {
    if (name.size() > kMaxFieldBytes || !IsFieldName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("request-header field name \"", LogEscaped(name), "\" cannot be written"));
    }
  }
  Strip(fields);
  for (const auto& [name, value] : out) fields.insert(name, value);
  return absl::OkStatus();
}

std::optional<Identity> RequestHeaderNames::Read(const boost::beast::http::fields& fields) const {
  Identity user;
  user.username = FirstNonEmpty(fields, username);
  if (user.username.empty()) return std::nullopt;
  user.uid = FirstNonEmpty(fields, uid);
  // allHeaderValues: each name in order, its values in order, empty ones skipped.
  for (const auto& n : group) {
    for (const auto& f : fields) {
      if (absl::EqualsIgnoreCase(ToAbsl(f.name_string()), n) && !f.value().empty()) {
        user.groups.emplace_back(f.value());
      }
    }
  }
  for (const auto& p : extra_prefix) {
    if (!p.empty()) ReadExtra(fields, p, user.extra);
  }
  std::stable_sort(user.extra.begin(), user.extra.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return user;
}

const RequestHeaderNames& DefaultRequestHeaderNames() {
  static const auto* names = new RequestHeaderNames();
  return *names;
}

}  // namespace kf
