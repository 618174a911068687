// Admission configuration: priority levels and flow schemas in the spirit of the apiserver's API
// Priority and Fairness (flowcontrol.apiserver.k8s.io), plus a token bucket per flow for polling
// clients. Read from a YAML file in Kubernetes style (apiVersion/kind, camelCase fields); see
// ratelimit/README.md for the format and DefaultConfig() for the defaults.
#ifndef KUBE_FANOUT_RATELIMIT_CONFIG_H_
#define KUBE_FANOUT_RATELIMIT_CONFIG_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kf::ratelimit {

struct PriorityLevelConfig {
  std::string name;
  bool exempt = false;  // Never queued or limited (still counted).
  int concurrency_shares = 30;
  int queues = 64;    // Shuffle-sharded fair queues.
  int hand_size = 6;  // Queues dealt to each flow.
  int queue_length_limit = 50;
  std::chrono::milliseconds queue_wait{15000};  // Longer in a queue: 429.
};

// One rule: every non-empty list must match ("*" matches anything; a trailing "*" is a prefix).
struct PolicyRule {
  std::vector<std::string> users, groups, user_agents;
  std::vector<std::string> verbs, api_groups, resources, namespaces;
  std::vector<std::string> non_resource_urls;  // Matches only non-resource requests.
};

// kByUser: the user; for a ServiceAccount token bound to a pod, the user and the pod's node (or,
// when the token names no node, the pod), so that the pods of one DaemonSet are flows of their
// own (RequestAttributes::bound_to).
enum class Distinguisher { kNone, kByUser, kByNamespace };

struct TokenBucketConfig {
  double qps = 0;  // 0: no bucket.
  double burst = 0;
};

struct FlowSchemaConfig {
  std::string name;
  std::string priority_level;
  int matching_precedence = 1000;  // Lower first.
  Distinguisher distinguisher = Distinguisher::kByUser;
  std::vector<PolicyRule> rules;  // Any rule; none → matches everything.
  TokenBucketConfig rate_limit;   // Per flow (schema + distinguisher value); long-running
                                  // requests (watches) are not metered.
  // GET and LIST the router sends to the cache, which cost the apiserver nothing: their own
  // bucket per flow. One the cache declines pays `rate_limit` too before it passes through
  // (Admission::ChargePassthrough). Unset: they pay `rate_limit` as every other request.
  std::optional<TokenBucketConfig> cached_read_rate_limit;
  // What the cache answers this schema's flows (GET, LIST, WATCH, in every encoding and form)
  // leaves out metadata.managedFields: an operator's choice for agents that never read it (log
  // shippers, metadata enrichers), ahead of the apiserver's own opt-out (Accept `drop=`, alpha
  // in 1.38). Reads the cache declines pass through whole.
  bool drop_managed_fields = false;
};

struct Config {
  // Seats for requests being served, shared by the non-exempt levels by their shares. A watch
  // holds its seat until its initial events are written, as the apiserver's APF counts watch
  // initialization.
  int total_concurrency = 400;
  std::vector<PriorityLevelConfig> priority_levels;
  std::vector<FlowSchemaConfig> flow_schemas;  // Sorted by matching_precedence.
};

// The defaults: exempt for system:masters; kubelets and kube-system at "system"; service
// accounts at "workload"; everyone else (incl. clients without credentials) at
// "global-default"; GET/LIST by one flow above 20/s (burst 40) get 429, reads answered from the
// cache above 1000/s (burst 2000).
Config DefaultConfig();

// Parses and validates; InvalidArgument with a message naming the field otherwise.
absl::StatusOr<Config> ParseConfig(std::string_view yaml);

// "*" anything, "abc*" a prefix, else exact.
bool GlobMatch(std::string_view pattern, std::string_view value);

}  // namespace kf::ratelimit

#endif  // KUBE_FANOUT_RATELIMIT_CONFIG_H_
