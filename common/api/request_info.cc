#include "common/api/request_info.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace kf {
namespace {

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

std::vector<std::string> SplitPath(std::string_view path) {
  // Go: strings.Split(strings.Trim(path, "/"), "/"), with "" → no parts.
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return {};
  return absl::StrSplit(ToAbsl(path), '/');
}

std::string VerbForMethod(std::string_view method) {
  if (method == "POST") return "create";
  if (method == "GET" || method == "HEAD") return "get";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return "delete";
  return "";
}

bool IsValidInt(std::string_view s) {
  if (s.empty()) return false;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  return std::all_of(s.begin() + i, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Splits a field selector on unescaped ',' and finds a metadata.name=X / metadata.name==X term.
// The escapes are the apiserver's (fields.EscapeValue: \\ \, \=).
bool ExactFieldMatch(std::string_view selector, std::string_view field, std::string* value) {
  std::string term;
  auto check_term = [&](const std::string& t) {
    // Find the operator outside escapes: "!=" is not an exact match; "==" and "=" are.
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\') {
        ++i;
        continue;
      }
      if (t[i] == '!' && i + 1 < t.size() && t[i + 1] == '=') return false;
      if (t[i] == '=') {
        std::string_view key = std::string_view(t).substr(0, i);
        std::string_view raw =
            std::string_view(t).substr(i + ((i + 1 < t.size() && t[i + 1] == '=') ? 2 : 1));
        if (key != field) return false;
        std::string unescaped;
        for (size_t j = 0; j < raw.size(); ++j) {
          if (raw[j] == '\\' && j + 1 < raw.size()) ++j;
          unescaped.push_back(raw[j]);
        }
        *value = std::move(unescaped);
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < selector.size(); ++i) {
    if (selector[i] == '\\' && i + 1 < selector.size()) {
      term.push_back(selector[i]);
      term.push_back(selector[++i]);
    } else if (selector[i] == ',') {
      if (check_term(term)) return true;
      term.clear();
    } else {
      term.push_back(selector[i]);
    }
  }
  return check_term(term);
}

// Each non-empty term of a field selector needs an operator, or fields.ParseSelector fails.
// (The full selector grammar lives in cache/; this is only what verb detection needs.)
bool FieldSelectorTermsHaveOperators(std::string_view selector) {
  bool has_op = false;
  bool empty = true;
  for (size_t i = 0; i <= selector.size(); ++i) {
    if (i == selector.size() || selector[i] == ',') {
      if (!empty && !has_op) return false;
      has_op = false;
      empty = true;
      continue;
    }
    empty = false;
    if (selector[i] == '\\') {
      ++i;
    } else if (selector[i] == '=') {
      has_op = true;
    }
  }
  return true;
}

// content.IsPathSegmentName: not "." or "..", no '/' or '%'.
bool IsPathSegmentName(std::string_view name) {
  return name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('%') == std::string_view::npos;
}

// Whether the ListOptions decoder would accept the query; the apiserver falls back to a
// watch=... reading of its own when it does not.
bool ListOptionsDecode(const Query& q, bool* watch) {
  bool ok = true;
  *watch = false;
  for (std::string_view key : {"watch", "allowWatchBookmarks", "sendInitialEvents"}) {
    if (auto v = q.First(key)) {
      auto b = ParseGoBool(*v);
      if (!b) ok = false;
      if (key == "watch" && b) *watch = *b;
    }
  }
  for (std::string_view key : {"timeoutSeconds", "limit"}) {
    if (auto v = q.First(key); v && !IsValidInt(*v)) ok = false;
  }
  if (auto fs = q.First("fieldSelector"); fs && !FieldSelectorTermsHaveOperators(*fs)) ok = false;
  return ok;
}

}  // namespace

absl::StatusOr<RequestInfo> RequestInfo::Parse(std::string_view method, std::string_view target) {
  RequestInfo info;
  std::string_view raw_path = target;
  if (size_t q = target.find('?'); q != std::string_view::npos) {
    raw_path = target.substr(0, q);
    info.query = Query::Parse(target.substr(q + 1));
  }
  auto path = PathUnescape(raw_path);
  if (!path)
    return absl::InvalidArgumentError(absl::StrCat("invalid URL escape in ", ToAbsl(raw_path)));
  info.path = std::move(*path);
  info.verb = absl::AsciiStrToLower(ToAbsl(method));

  std::vector<std::string> parts = SplitPath(info.path);
  if (parts.size() < 3 || !IsOneOf(parts[0], {"api", "apis"})) return info;
  info.api_prefix = parts[0];
  size_t at = 1;
  if (info.api_prefix == "apis") {
    if (parts.size() - at < 3) return info;
    info.api_group = parts[at++];
  }
  info.is_resource_request = true;
  info.api_version = parts[at++];

  if (IsOneOf(parts[at], {"watch", "proxy"})) {
    if (parts.size() - at < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("unable to determine kind and namespace from url, ", ToAbsl(target)));
    }
    info.verb = parts[at++];
    info.verb_via_path_prefix = true;
  } else {
    info.verb = VerbForMethod(method);
  }

  if (parts[at] == "namespaces") {
    if (parts.size() - at > 1) {
      info.namespace_ = parts[at + 1];
      if (parts.size() - at > 2 && !IsOneOf(parts[at + 2], {"status", "finalize"})) at += 2;
    }
  }
  info.parts.assign(parts.begin() + static_cast<std::ptrdiff_t>(at), parts.end());
  const auto& p = info.parts;
  if (p.size() >= 3 && info.verb != "proxy") info.subresource = p[2];
  if (p.size() >= 2) info.name = p[1];
  if (!p.empty()) info.resource = p[0];

  info.ResolveCollectionVerb();
  return info;
}

void RequestInfo::ResolveCollectionVerb() {
  // As the apiserver's RequestInfoFactory: a GET of a collection is a list or a watch (as the
  // query decodes); a list selecting one name by field is authorized as that name.
  if (name.empty() && verb == "get") {
    bool watch = false;
    const bool decoded = ListOptionsDecode(query, &watch);
    if (!decoded) {
      auto v = query.First("watch");
      const std::string lower = v ? absl::AsciiStrToLower(ToAbsl(*v)) : "";
      watch = v && lower != "false" && lower != "0";
    }
    verb = watch ? "watch" : "list";
    if (auto fs = query.First("fieldSelector"); decoded && fs) {
      std::string selected;
      if (ExactFieldMatch(*fs, "metadata.name", &selected) && IsPathSegmentName(selected)) {
        name = std::move(selected);
        name_from_field_selector = true;
      }
    }
  }
  if (name.empty() && verb == "delete") verb = "deletecollection";
  if (!verb_via_path_prefix && IsOneOf(verb, {"list", "watch", "deletecollection"})) {
    if (auto v = query.First("fieldSelector")) field_selector = std::string(*v);
    if (auto v = query.First("labelSelector")) label_selector = std::string(*v);
  }
}

std::string RequestInfo::GroupResource() const {
  return api_group.empty() ? resource : absl::StrCat(resource, ".", api_group);
}

}  // namespace kf
