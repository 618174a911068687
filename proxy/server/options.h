// ProxyOptions: kube-fanout's command-line flags, Kubernetes style (--name=value, repeatable
// --upstream), parsed and validated once in main(). Value type.
#ifndef KUBE_FANOUT_SERVER_OPTIONS_H_
#define KUBE_FANOUT_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proxy/upstream/upstream_config.h"

namespace kf {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  // "127.0.0.1:8001", "[::1]:8001", ":8001" (all addresses).
  static absl::StatusOr<HostPort> Parse(std::string_view text);
};

struct ProxyOptions {
  std::string listen;                  // Plain HTTP listener, HOST:PORT.
  std::string secure_listen;           // HTTPS listener, HOST:PORT.
  std::string metrics_listen;          // Health and metrics only, plain HTTP, HOST:PORT.
  bool allow_insecure_listen = false;  // --listen on a non-loopback address anyway.
  std::string config_file;             // --config: the YAML file the flags were read from.
  std::string tls_cert_file;
  std::string tls_private_key_file;
  std::vector<std::string> tls_cipher_suites;  // Go's names; empty: forward-secret AEAD only.
  std::string tls_min_version;                 // "VersionTLS12" …; empty: TLS 1.2.
  std::string client_ca_file;  // Verify client certificates on --secure-listen against it.
  // Front proxies in front of kube-fanout (a lower kube-fanout tier, kube-aggregator-like
  // proxies): their CA and the names (CNs) allowed.
  std::string requestheader_client_ca_file;
  std::vector<std::string> requestheader_allowed_names;
  // The front proxy: kube-fanout's client certificate for requests made as a user it cannot
  // forward otherwise (client-certificate users), and the request-header field names.
  std::string proxy_client_cert_file;
  std::string proxy_client_key_file;
  std::vector<std::string> requestheader_username_headers;
  std::vector<std::string> requestheader_group_headers;
  std::vector<std::string> requestheader_uid_headers;
  std::vector<std::string> requestheader_extra_headers_prefix;
  // Answers of TokenReviews and SubjectAccessReviews kept, per worker thread.
  // The kube-apiserver's webhook authenticator's and authorizer's defaults.
  absl::Duration authentication_cache_ttl = absl::Minutes(2);
  absl::Duration authentication_cache_unauthorized_ttl = absl::Seconds(10);
  absl::Duration authorization_cache_authorized_ttl = absl::Minutes(5);
  absl::Duration authorization_cache_unauthorized_ttl = absl::Seconds(30);
  int authentication_cache_max_entries = 10000;
  double authentication_token_review_qps = 100;  // New TokenReviews per second; 0: no limit.
  int authorization_cache_max_entries = 10000;
  bool authorization_share_node_reviews = true;  // Node reviews shared by shape (node_shape.h).
  std::string kubeconfig;
  std::string context;
  std::vector<std::string> upstreams;
  std::vector<std::string> events_upstreams;  // Events (v1, events.k8s.io) go here if set.
  bool event_spam_filter = true;
  bool coalesce_reads = true;
  std::string upstream_ca_file;
  std::string upstream_token_file;
  bool upstream_insecure_skip_tls_verify = false;
  int threads = 0;       // 0 → one per core.
  bool io_uring = true;  // Watch writes of a fan-out burst batched in io_uring (when it can be).
  // After SIGTERM: /readyz fails, everything else served as before, for this long.
  absl::Duration shutdown_delay_duration = absl::ZeroDuration();
  absl::Duration shutdown_watch_termination_grace_period = absl::ZeroDuration();
  absl::Duration shutdown_grace_period = absl::Seconds(30);
  absl::Duration upstream_dial_timeout = absl::Seconds(10);
  absl::Duration upstream_watch_idle_timeout = absl::Minutes(2);
  bool upstream_http2 = true;  // Passthrough without a body or an upgrade over HTTP/2.
  std::vector<std::string> cache_resources;  // Empty after parsing: the default set.
  bool cache_resources_set = false;          // --cache-resources given (may be "" = none).
  // Cached resources whose protobuf cache starts with the JSON one rather than at its first
  // protobuf request (the manifests list the node agents' kinds).
  std::string protobuf_cache_resources;
  uint64_t watch_cache_window_bytes = 256u << 20;
  uint64_t watcher_max_queue_bytes = 8u << 20;
  uint64_t watchers_max_total_queue_bytes = 1u << 30;  // 0: unlimited.
  int64_t max_watchers = 100000;                       // Cached watches open; 0: unlimited.
  int64_t max_watchers_per_user = 1000;                // Per user (and bound pod); 0: unlimited.
  uint32_t http2_max_streams_per_connection = 0;       // 0: the apiserver's 100.
  // HTTP/2 bounds of kube-fanout's own (proxy/edge/http2_session.h, Http2Limits).
  absl::Duration http2_header_block_timeout = absl::Seconds(30);
  absl::Duration request_timeout = absl::Minutes(1);  // A request body's whole deadline.
  uint32_t http2_max_continuations = 8;
  uint64_t http2_max_header_bytes_per_connection = 4 * ((1u << 20) + 320);
  uint32_t http2_stream_reset_burst = 1000;
  uint32_t http2_stream_reset_rate = 33;
  absl::Duration http2_frame_buffer_release_after = absl::Seconds(5);  // Zero: never.
  absl::Duration heap_trim_interval = absl::Seconds(10);               // Zero: never.
  absl::Duration watch_bookmark_interval = absl::Minutes(1);
  // One consistent LIST/GET per cached resource per interval goes to the apiserver at once
  // instead of waiting for the cache's proof of freshness; zero: never.
  absl::Duration consistent_read_passthrough_interval = absl::Seconds(1);
  // Besides, consistent GETs of one object per cached resource per second that go to the
  // apiserver at once (proxy/sync/passthrough_budget.h); zero: none.
  uint32_t consistent_get_passthrough_qps = 50;
  // Each cache compared with the upstream's list at its exact resourceVersion about this often
  // (proxy/sync/self_check.h); zero: never.
  absl::Duration cache_check_interval = absl::Minutes(5);
  // Warm restart (proxy/sync/snapshot_store.h): the directory ("" = off) and its bounds.
  std::string cache_snapshot_dir;
  uint64_t cache_snapshot_max_bytes = 256u << 20;
  absl::Duration cache_snapshot_interval = absl::Seconds(10);
  absl::Duration cache_snapshot_max_age = absl::Minutes(10);
  bool cache_snapshot_secrets = false;
  bool enable_admission = true;
  std::string admission_config;         // YAML file; empty: the defaults.
  int max_passthrough_in_flight = 400;  // 0: unlimited.
  // Passthrough watches and tunnels open at once, in all and per identity (0: unlimited).
  int64_t max_passthrough_watches = 10000;
  int64_t max_passthrough_watches_per_user = 100;
  // Large cached LISTs (proxy/serve/list_pool.h): the threads that build and compress them (0: the
  // I/O threads do), and the bytes of compressed answers shared (proxy/serve/gzip_cache.h; 0:
  // none).
  int list_threads = 1;
  uint64_t list_gzip_cache_bytes = 64u << 20;
  // Cached WatchList answers compressed for clients accepting gzip (proxy/serve/watch_gzip.h):
  // "auto" (as the upstream does), "always" or "never".
  std::string watchlist_gzip = "auto";
  int verbosity = 0;
  bool help = false;
  bool version = false;
};

// Parses argv, and the --config file if one is given (command-line flags win over it).
// InvalidArgument with a one-line reason on unknown flags or keys, or bad values.
absl::StatusOr<ProxyOptions> ParseFlags(int argc, const char* const* argv);

// The --help text: usage line and every flag with its default, grouped by topic.
std::string HelpText();

// Checks the combination of flags (listeners, TLS files, upstream sources). A plain --listen
// (the whole API, clients' tokens in clear text) must be on loopback unless
// --allow-insecure-listen.
absl::Status Validate(const ProxyOptions& options);

// The upstream in order of precedence: --upstream flags, --kubeconfig, the in-cluster
// ServiceAccount, then $KUBECONFIG. --upstream-ca-file / --upstream-token-file override.
absl::StatusOr<UpstreamConfig> ResolveUpstream(const ProxyOptions& options);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_OPTIONS_H_
