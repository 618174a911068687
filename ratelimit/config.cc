#include "ratelimit/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kf::ratelimit {
namespace {

constexpr char kApiVersion[] = "kube-fanout.io/v1alpha1";
constexpr char kKind[] = "AdmissionConfiguration";
constexpr size_t kMaxConfigBytes = 1u << 20;

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// Unknown fields are errors, as the apiserver's strict decoding makes them.
absl::Status OnlyKnown(const YAML::Node& node, const std::string& path,
                       std::initializer_list<std::string_view> known) {
  if (!node.IsMap()) return Invalid(path, "must be a mapping");
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return Invalid(path, "field names must be strings");
    const std::string key = kv.first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return Invalid(absl::StrCat(path, ".", key), "unknown field");
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Read(const YAML::Node& node, const char* key, const std::string& path, T* out) {
  if (!node[key]) return absl::OkStatus();
  try {
    *out = node[key].as<T>();
  } catch (const YAML::Exception&) {
    return Invalid(absl::StrCat(path, ".", key), "wrong type");
  }
  return absl::OkStatus();
}

absl::Status ReadList(const YAML::Node& node, const char* key, const std::string& path,
                      std::vector<std::string>* out) {
  if (!node[key]) return absl::OkStatus();
  if (!node[key].IsSequence()) return Invalid(absl::StrCat(path, ".", key), "must be a list");
  for (const auto& item : node[key]) {
    if (!item.IsScalar()) return Invalid(absl::StrCat(path, ".", key), "must be strings");
    out->push_back(item.as<std::string>());
  }
  return absl::OkStatus();
}

#define KF_RETURN_IF_ERROR(expr)                    \
  do {                                              \
    if (absl::Status s = (expr); !s.ok()) return s; \
  } while (false)

absl::StatusOr<PriorityLevelConfig> ParseLevel(const YAML::Node& n, const std::string& path) {
  KF_RETURN_IF_ERROR(OnlyKnown(n, path, {"name", "type", "limited"}));
  PriorityLevelConfig l;
  KF_RETURN_IF_ERROR(Read(n, "name", path, &l.name));
  if (l.name.empty()) return Invalid(path + ".name", "required");
  std::string type = "Limited";
  KF_RETURN_IF_ERROR(Read(n, "type", path, &type));
  if (type == "Exempt") {
    l.exempt = true;
    if (n["limited"]) return Invalid(path + ".limited", "not allowed for type Exempt");
    return l;
  }
  if (type != "Limited") return Invalid(path + ".type", "must be Limited or Exempt");
  if (const YAML::Node lim = n["limited"]) {
    const std::string p = path + ".limited";
    KF_RETURN_IF_ERROR(OnlyKnown(
        lim, p,
        {"concurrencyShares", "queues", "handSize", "queueLengthLimit", "queueWaitSeconds"}));
    KF_RETURN_IF_ERROR(Read(lim, "concurrencyShares", p, &l.concurrency_shares));
    KF_RETURN_IF_ERROR(Read(lim, "queues", p, &l.queues));
    KF_RETURN_IF_ERROR(Read(lim, "handSize", p, &l.hand_size));
    KF_RETURN_IF_ERROR(Read(lim, "queueLengthLimit", p, &l.queue_length_limit));
    double wait = 15;
    KF_RETURN_IF_ERROR(Read(lim, "queueWaitSeconds", p, &wait));
    if (wait < 0) return Invalid(p + ".queueWaitSeconds", "must be >= 0");
    l.queue_wait = std::chrono::milliseconds(static_cast<int64_t>(wait * 1000));
    if (l.concurrency_shares < 1) return Invalid(p + ".concurrencyShares", "must be >= 1");
    if (l.queues < 1) return Invalid(p + ".queues", "must be >= 1");
    if (l.hand_size < 1 || l.hand_size > l.queues) {
      return Invalid(p + ".handSize", "must be between 1 and queues");
    }
    if (l.queue_length_limit < 0) return Invalid(p + ".queueLengthLimit", "must be >= 0");
  }
  return l;
}

absl::StatusOr<PolicyRule> ParseRule(const YAML::Node& n, const std::string& path) {
  KF_RETURN_IF_ERROR(OnlyKnown(n, path,
                               {"users", "groups", "userAgents", "verbs", "apiGroups", "resources",
                                "namespaces", "nonResourceURLs"}));
  PolicyRule r;
  KF_RETURN_IF_ERROR(ReadList(n, "users", path, &r.users));
  KF_RETURN_IF_ERROR(ReadList(n, "groups", path, &r.groups));
  KF_RETURN_IF_ERROR(ReadList(n, "userAgents", path, &r.user_agents));
  KF_RETURN_IF_ERROR(ReadList(n, "verbs", path, &r.verbs));
  KF_RETURN_IF_ERROR(ReadList(n, "apiGroups", path, &r.api_groups));
  KF_RETURN_IF_ERROR(ReadList(n, "resources", path, &r.resources));
  KF_RETURN_IF_ERROR(ReadList(n, "namespaces", path, &r.namespaces));
  KF_RETURN_IF_ERROR(ReadList(n, "nonResourceURLs", path, &r.non_resource_urls));
  if (!r.non_resource_urls.empty() &&
      (!r.api_groups.empty() || !r.resources.empty() || !r.namespaces.empty())) {
    return Invalid(path, "nonResourceURLs cannot be combined with apiGroups/resources/namespaces");
  }
  return r;
}

absl::StatusOr<TokenBucketConfig> ParseRateLimit(const YAML::Node& n, const std::string& path) {
  KF_RETURN_IF_ERROR(OnlyKnown(n, path, {"qps", "burst"}));
  TokenBucketConfig limit;
  KF_RETURN_IF_ERROR(Read(n, "qps", path, &limit.qps));
  KF_RETURN_IF_ERROR(Read(n, "burst", path, &limit.burst));
  if (limit.qps <= 0) return Invalid(path + ".qps", "must be > 0");
  if (limit.burst < 1) limit.burst = std::max(1.0, limit.qps);
  return limit;
}

absl::StatusOr<FlowSchemaConfig> ParseSchema(const YAML::Node& n, const std::string& path) {
  KF_RETURN_IF_ERROR(
      OnlyKnown(n, path,
                {"name", "priorityLevel", "matchingPrecedence", "distinguisherMethod", "rules",
                 "rateLimit", "cachedReadRateLimit", "dropManagedFields"}));
  FlowSchemaConfig f;
  KF_RETURN_IF_ERROR(Read(n, "name", path, &f.name));
  if (f.name.empty()) return Invalid(path + ".name", "required");
  KF_RETURN_IF_ERROR(Read(n, "priorityLevel", path, &f.priority_level));
  if (f.priority_level.empty()) return Invalid(path + ".priorityLevel", "required");
  KF_RETURN_IF_ERROR(Read(n, "matchingPrecedence", path, &f.matching_precedence));
  if (f.matching_precedence < 1 || f.matching_precedence > 10000) {
    return Invalid(path + ".matchingPrecedence", "must be between 1 and 10000");
  }
  std::string d = "ByUser";
  KF_RETURN_IF_ERROR(Read(n, "distinguisherMethod", path, &d));
  if (d == "ByUser") {
    f.distinguisher = Distinguisher::kByUser;
  } else if (d == "ByNamespace") {
    f.distinguisher = Distinguisher::kByNamespace;
  } else if (d == "None") {
    f.distinguisher = Distinguisher::kNone;
  } else {
    return Invalid(path + ".distinguisherMethod", "must be ByUser, ByNamespace or None");
  }
  if (const YAML::Node rules = n["rules"]) {
    if (!rules.IsSequence()) return Invalid(path + ".rules", "must be a list");
    for (size_t i = 0; i < rules.size(); ++i) {
      auto r = ParseRule(rules[i], absl::StrCat(path, ".rules[", i, "]"));
      if (!r.ok()) return r.status();
      f.rules.push_back(*std::move(r));
    }
  }
  if (const YAML::Node rl = n["rateLimit"]) {
    auto limit = ParseRateLimit(rl, path + ".rateLimit");
    if (!limit.ok()) return limit.status();
    f.rate_limit = *limit;
  }
  if (const YAML::Node rl = n["cachedReadRateLimit"]) {
    auto limit = ParseRateLimit(rl, path + ".cachedReadRateLimit");
    if (!limit.ok()) return limit.status();
    f.cached_read_rate_limit = *limit;
  }
  KF_RETURN_IF_ERROR(Read(n, "dropManagedFields", path, &f.drop_managed_fields));
  return f;
}

absl::Status Validate(const Config& c) {
  if (c.total_concurrency < 1) return Invalid("totalConcurrency", "must be >= 1");
  std::set<std::string> levels;
  for (const auto& l : c.priority_levels) {
    if (!levels.insert(l.name).second) {
      return Invalid("priorityLevels", absl::StrCat("duplicate name \"", l.name, "\""));
    }
  }
  std::set<std::string> schemas;
  for (const auto& f : c.flow_schemas) {
    if (!schemas.insert(f.name).second) {
      return Invalid("flowSchemas", absl::StrCat("duplicate name \"", f.name, "\""));
    }
    if (!levels.contains(f.priority_level)) {
      return Invalid(absl::StrCat("flowSchemas[", f.name, "].priorityLevel"),
                     absl::StrCat("no priority level \"", f.priority_level, "\""));
    }
  }
  if (c.flow_schemas.empty()) return Invalid("flowSchemas", "at least one is required");
  return absl::OkStatus();
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view value) {
  if (pattern == "*") return true;
  if (!pattern.empty() && pattern.back() == '*') {
    pattern.remove_suffix(1);
    return value.substr(0, pattern.size()) == pattern;
  }
  return pattern == value;
}

Config DefaultConfig() {
  Config c;
  c.priority_levels = {
      PriorityLevelConfig{"exempt", true},
      PriorityLevelConfig{"system", false, 30, 64, 6, 50, std::chrono::milliseconds(15000)},
      PriorityLevelConfig{"workload", false, 40, 128, 6, 50, std::chrono::milliseconds(15000)},
      PriorityLevelConfig{"global-default", false, 20, 128, 6, 50,
                          std::chrono::milliseconds(15000)},
  };
  PolicyRule masters;
  masters.groups = {"system:masters"};
  PolicyRule nodes;
  nodes.groups = {"system:nodes"};
  PolicyRule kube_system;
  kube_system.users = {"system:serviceaccount:kube-system:*"};
  PolicyRule service_accounts;
  service_accounts.groups = {"system:serviceaccounts"};
  // What passes through costs the apiserver a request: 20/s per flow. A read answered from the
  // cache costs it nothing and kube-fanout tens of microseconds (its seats and fair queues share
  // that out): its bucket only stops a runaway loop.
  const TokenBucketConfig polling{20, 40};
  const TokenBucketConfig cached{1000, 2000};
  c.flow_schemas = {
      FlowSchemaConfig{"exempt", "exempt", 1, Distinguisher::kNone, {masters}, {}, {}},
      FlowSchemaConfig{
          "system", "system", 500, Distinguisher::kByUser, {nodes, kube_system}, {}, {}},
      FlowSchemaConfig{"service-accounts",
                       "workload",
                       9000,
                       Distinguisher::kByUser,
                       {service_accounts},
                       polling,
                       cached},
      FlowSchemaConfig{
          "global-default", "global-default", 9900, Distinguisher::kByUser, {}, polling, cached},
  };
  return c;
}

absl::StatusOr<Config> ParseConfigNode(const YAML::Node& root) {
  KF_RETURN_IF_ERROR(OnlyKnown(
      root, "config", {"apiVersion", "kind", "totalConcurrency", "priorityLevels", "flowSchemas"}));
  std::string api_version, kind;
  KF_RETURN_IF_ERROR(Read(root, "apiVersion", "config", &api_version));
  KF_RETURN_IF_ERROR(Read(root, "kind", "config", &kind));
  if (api_version != kApiVersion || kind != kKind) {
    return Invalid("config", absl::StrCat("want apiVersion ", kApiVersion, " and kind ", kKind));
  }
  Config c;
  KF_RETURN_IF_ERROR(Read(root, "totalConcurrency", "config", &c.total_concurrency));
  if (const YAML::Node levels = root["priorityLevels"]) {
    if (!levels.IsSequence()) return Invalid("priorityLevels", "must be a list");
    for (size_t i = 0; i < levels.size(); ++i) {
      auto l = ParseLevel(levels[i], absl::StrCat("priorityLevels[", i, "]"));
      if (!l.ok()) return l.status();
      c.priority_levels.push_back(*std::move(l));
    }
  }
  if (const YAML::Node schemas = root["flowSchemas"]) {
    if (!schemas.IsSequence()) return Invalid("flowSchemas", "must be a list");
    for (size_t i = 0; i < schemas.size(); ++i) {
      auto f = ParseSchema(schemas[i], absl::StrCat("flowSchemas[", i, "]"));
      if (!f.ok()) return f.status();
      c.flow_schemas.push_back(*std::move(f));
    }
  }
  KF_RETURN_IF_ERROR(Validate(c));
  std::stable_sort(c.flow_schemas.begin(), c.flow_schemas.end(), [](const auto& a, const auto& b) {
    return a.matching_precedence < b.matching_precedence;
  });
  return c;
}

absl::StatusOr<Config> ParseConfig(std::string_view yaml) {
  if (yaml.size() > kMaxConfigBytes) {
    return Invalid("config", absl::StrCat("larger than ", kMaxConfigBytes, " bytes"));
  }
  // yaml-cpp reports errors by exception (including its own nesting-depth guard): every one
  // stops here and becomes a Status, whatever part of the walk above raised it.
  try {
    return ParseConfigNode(YAML::Load(std::string(yaml)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid configuration: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid configuration: ", e.what()));
  }
}

}  // namespace kf::ratelimit
