#include "proxy/upstream/node_shape.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_format.h"

namespace kf {
namespace {

constexpr std::string_view kNodeUserPrefix = "system:node:";
constexpr std::string_view kNodesGroup = "system:nodes";

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Where a field selector term's operator is (the first of "!=", "==", "=" outside an escape,
// as apimachinery's fields.splitTerm finds it) and how long it is; npos when there is none.
std::pair<size_t, size_t> FindOperator(std::string_view term) {
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '\\') {
      ++i;
      continue;
    }
    if (term.substr(i, 2) == "!=" || term.substr(i, 2) == "==") return {i, 2};
    if (term[i] == '=') return {i, 1};
  }
  return {std::string_view::npos, 0};
}

// The terms of a raw field selector, split on each ',' outside an escape.
std::vector<std::string_view> Terms(std::string_view raw) {
  std::vector<std::string_view> terms;
  size_t start = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\\') {
      ++i;
    } else if (raw[i] == ',') {
      terms.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(raw.substr(start));
  return terms;
}

// `raw` with each term's value equal to `node` replaced by `probe`; `rest` gets what is left
// when those values are taken out (where `node` must not appear for the shape to hold).
std::string RewriteFieldSelector(std::string_view raw, std::string_view node,
                                 std::string_view probe, std::string* rest) {
  std::string out;
  bool first = true;
  for (std::string_view term : Terms(raw)) {
    if (!first) {
      out += ',';
      *rest += ',';
    }
    first = false;
    const auto [at, len] = FindOperator(term);
    if (at != std::string_view::npos && term.substr(at + len) == node) {
      out.append(term.substr(0, at + len)).append(probe);
      rest->append(term.substr(0, at + len));
    } else {
      out.append(term);
      rest->append(term);
    }
  }
  return out;
}

}  // namespace

std::optional<std::string_view> SharableNodeName(const Identity& user) {
  const std::string_view name = user.username;
  if (!name.starts_with(kNodeUserPrefix) || name.size() == kNodeUserPrefix.size()) {
    return std::nullopt;
  }
  if (std::find(user.groups.begin(), user.groups.end(), kNodesGroup) == user.groups.end()) {
    return std::nullopt;
  }
  if (!user.uid.empty() || !user.extra.empty()) return std::nullopt;
  return name.substr(kNodeUserPrefix.size());
}

std::optional<AccessAttributes> NodeShape(const AccessAttributes& attrs, std::string_view node,
                                          std::string_view probe) {
  if (node.empty() || probe.empty()) return std::nullopt;
  for (const std::string* part :
       {&attrs.verb, &attrs.group, &attrs.version, &attrs.resource, &attrs.namespace_, &attrs.name,
        &attrs.field_selector, &attrs.label_selector, &attrs.path}) {
    if (Contains(*part, probe)) return std::nullopt;
  }
  AccessAttributes shape = attrs;
  std::string rest;
  if (!attrs.field_selector.empty()) {
    shape.field_selector = RewriteFieldSelector(attrs.field_selector, node, probe, &rest);
  }
  if (attrs.name == node) shape.name = std::string(probe);
  const std::string_view name_rest = attrs.name == node ? std::string_view() : attrs.name;
  for (std::string_view left :
       {std::string_view(attrs.namespace_), name_rest, std::string_view(rest),
        std::string_view(attrs.label_selector), std::string_view(attrs.path)}) {
    if (Contains(left, node)) return std::nullopt;
  }
  return shape;
}

Identity ProbeNodeUser(std::string_view probe, const std::vector<std::string>& groups) {
  Identity user;
  user.username = std::string(kNodeUserPrefix).append(probe);
  user.groups = groups;
  return user;
}

std::string NewProbeNodeName() {
  std::random_device random;
  const uint64_t bits = (static_cast<uint64_t>(random()) << 32) | random();
  return absl::StrFormat("kube-fanout-probe-%016x", bits);
}

}  // namespace kf
