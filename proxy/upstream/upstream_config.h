// UpstreamConfig: where the apiserver is and how kube-fanout trusts it and (for its own requests
// only) authenticates to it. Built from --upstream flags, a kubeconfig file, or the in-cluster
// ServiceAccount mount. Value types.
//
// The proxy's own credentials (token, client certificate) are for the proxy's own requests (the
// cache's LIST/WATCH); passthrough never uses them: a client's request carries the client's own
// Authorization header and goes over a TLS context without a client certificate.
#ifndef KUBE_FANOUT_UPSTREAM_UPSTREAM_CONFIG_H_
#define KUBE_FANOUT_UPSTREAM_UPSTREAM_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kf {

struct UpstreamEndpoint {
  bool tls = true;
  std::string host;  // Without brackets for IPv6.
  uint16_t port = 443;
  std::string base_path;  // "" or "/prefix" (no trailing slash), prepended to request targets.

  // "https://host:port/prefix" → endpoint. Accepts http and https only.
  static absl::StatusOr<UpstreamEndpoint> Parse(std::string_view url);
  std::string Url() const;
  std::string HostHeader() const;  // host[:port], port omitted when it is the scheme's default.
};

struct UpstreamConfig {
  std::vector<UpstreamEndpoint> endpoints;  // Tried in order; failover to the next.
  std::string ca_pem;                       // Trust for the upstream; empty → system roots.
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // Overrides the name checked and sent as SNI.
  // The proxy's own identity (never lent to clients).
  std::string token;
  std::string token_file;  // Re-read by the user of the config, as client-go does.
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string source;  // "flags", "kubeconfig PATH", "in-cluster": for logs.
};

// Loads a kubeconfig: the given context (or current-context), its cluster and user. Relative
// file paths are resolved against the kubeconfig's directory; *-data fields are base64.
absl::StatusOr<UpstreamConfig> LoadKubeconfig(const std::string& path, const std::string& context);

// The in-cluster configuration: $KUBERNETES_SERVICE_HOST/_PORT and the ServiceAccount mount
// under `sa_dir` (token, ca.crt). NotFound when not running in a pod.
absl::StatusOr<UpstreamConfig> InClusterConfig(
    std::string_view sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_UPSTREAM_CONFIG_H_
