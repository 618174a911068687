#include "proxy/server/options.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"
#include "proxy/edge/tls_config.h"
#include "proxy/server/config_file.h"

namespace kf {
namespace po = boost::program_options;
namespace {

// Flag values parsed after Boost (durations).
struct RawFlags {
  std::string grace, dial, bookmark, watch_idle, consistent_passthrough;
  std::string snapshot_interval, snapshot_max_age, http2_header_block;
  std::string authn_ttl, authn_negative_ttl, authz_ttl, authz_negative_ttl;
};

po::options_description Describe(ProxyOptions* o, RawFlags* raw) {
  std::string* grace = &raw->grace;
  std::string* dial = &raw->dial;
  std::string* watch_idle = &raw->watch_idle;
  std::string* bookmark = &raw->bookmark;
  po::options_description d("Flags", /*line_length=*/100, /*min_description_length=*/50);
  // clang-format off
  d.add_options()
    ("listen", po::value(&o->listen)->value_name("HOST:PORT"),
     "Serve plain HTTP on this address. Default 127.0.0.1:8001 when neither --listen nor "
     "--secure-listen is given.")
    ("secure-listen", po::value(&o->secure_listen)->value_name("HOST:PORT"),
     "Serve HTTPS on this address; needs --tls-cert-file and --tls-private-key-file.")
    ("metrics-listen", po::value(&o->metrics_listen)->value_name("HOST:PORT"),
     "Serve /healthz, /livez, /readyz and /metrics, and nothing else, over plain HTTP on this "
     "address (for probes and Prometheus; the API stays on the other listeners).")
    ("allow-insecure-listen", po::bool_switch(&o->allow_insecure_listen),
     "Allow --listen on a non-loopback address: the whole API in plain HTTP, clients' bearer "
     "tokens in clear text on the network. Without it such a --listen is an error.")
    ("tls-cert-file", po::value(&o->tls_cert_file)->value_name("PATH"),
     "PEM certificate (chain) served on --secure-listen.")
    ("tls-private-key-file", po::value(&o->tls_private_key_file)->value_name("PATH"),
     "PEM private key matching --tls-cert-file. Both files are re-read when they change: new "
     "connections get the new pair; one that does not load is refused and the old one kept.")
    ("tls-cipher-suites", po::value(&o->tls_cipher_suites)->value_name("LIST")->composing(),
     "Comma-separated cipher suites for --secure-listen, named as Go's crypto/tls (and the "
     "apiserver's flag) names them, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256. They govern "
     "TLS 1.2; TLS 1.3 always offers its AEAD suites. Default: the forward-secret AEAD suites "
     "(ECDHE with AES-GCM or ChaCha20-Poly1305).")
    ("tls-min-version", po::value(&o->tls_min_version)->value_name("VERSION"),
     "Minimum TLS version on --secure-listen: VersionTLS10, VersionTLS11, VersionTLS12 or "
     "VersionTLS13. Default VersionTLS12.")
    ("client-ca-file", po::value(&o->client_ca_file)->value_name("PATH"),
     "PEM CA bundle: --secure-listen asks clients for a certificate and a request with one "
     "that chains to it is the certificate's user (CommonName) and groups (Organization), as "
     "the apiserver's flag. Such users reach the upstream through the front proxy; needs "
     "--proxy-client-cert-file and --proxy-client-key-file.")
    ("requestheader-client-ca-file",
     po::value(&o->requestheader_client_ca_file)->value_name("PATH"),
     "PEM CA bundle of front proxies (such as a lower kube-fanout tier), as the apiserver's "
     "flag: a request on a connection whose client certificate chains to it (and whose CN is "
     "in --requestheader-allowed-names) is the user its --requestheader-* fields name. Needs "
     "--proxy-client-cert-file to pass such users on.")
    ("requestheader-allowed-names",
     po::value(&o->requestheader_allowed_names)->value_name("LIST")->composing(),
     "Front proxies' client certificate CNs allowed; empty: any certificate of the CA.")
    ("proxy-client-cert-file", po::value(&o->proxy_client_cert_file)->value_name("PATH"),
     "Client certificate kube-fanout presents as the apiserver's front proxy (signed by its "
     "--requestheader-client-ca-file, CN in its --requestheader-allowed-names) for requests "
     "of users authenticated here by a client certificate.")
    ("proxy-client-key-file", po::value(&o->proxy_client_key_file)->value_name("PATH"),
     "Private key of --proxy-client-cert-file.")
    ("requestheader-username-headers",
     po::value(&o->requestheader_username_headers)->value_name("LIST")
         ->composing(),
     "Request-header fields for the user name, as the apiserver's flag (first one set; all "
     "removed from clients' requests). Default X-Remote-User.")
    ("requestheader-group-headers",
     po::value(&o->requestheader_group_headers)->value_name("LIST")->composing(),
     "Request-header fields for groups. Default X-Remote-Group.")
    ("requestheader-uid-headers",
     po::value(&o->requestheader_uid_headers)->value_name("LIST")->composing(),
     "Request-header fields for the user's UID. Default X-Remote-Uid.")
    ("requestheader-extra-headers-prefix",
     po::value(&o->requestheader_extra_headers_prefix)->value_name("LIST")->composing(),
     "Request-header field prefixes for extra user attributes. Default X-Remote-Extra-.")
    ("authentication-token-webhook-cache-ttl",
     po::value(&raw->authn_ttl)->value_name("DURATION")->default_value("2m"),
     "How long a token's TokenReview answer (authenticated) is kept; the apiserver's webhook "
     "token authenticator's flag and default.")
    ("authentication-token-webhook-cache-unauthorized-ttl",
     po::value(&raw->authn_negative_ttl)->value_name("DURATION")->default_value("10s"),
     "How long a token's TokenReview answer (not authenticated) is kept.")
    ("authorization-webhook-cache-authorized-ttl",
     po::value(&raw->authz_ttl)->value_name("DURATION")->default_value("5m"),
     "How long an allowed SubjectAccessReview answer is kept (per user and request shape); the "
     "apiserver's webhook authorizer's flag and default: RBAC revoked meanwhile still "
     "serves that user from the cache until then.")
    ("authorization-webhook-cache-unauthorized-ttl",
     po::value(&raw->authz_negative_ttl)->value_name("DURATION")->default_value("30s"),
     "How long a denied SubjectAccessReview answer is kept (the apiserver's default).")
    ("authentication-token-review-qps",
     po::value(&o->authentication_token_review_qps)->value_name("QPS")->default_value(100),
     "New TokenReviews (tokens not in the cache) per second, burst twice that; past it a "
     "token goes unreviewed (its requests pass through, admission sees user agent and "
     "address), so made-up tokens cannot flood the apiserver with reviews. 0: no limit.")
    ("authentication-cache-max-entries",
     po::value(&o->authentication_cache_max_entries)->value_name("N")->default_value(10000),
     "TokenReview answers kept per I/O thread; past it the entries nearest expiry go first.")
    ("authorization-cache-max-entries",
     po::value(&o->authorization_cache_max_entries)->value_name("N")->default_value(10000),
     "SubjectAccessReview answers kept per I/O thread; past it the entries nearest expiry go "
     "first.")
    ("kubeconfig", po::value(&o->kubeconfig)->value_name("PATH"),
     "Kubeconfig naming the upstream apiserver and kube-fanout's own credentials.")
    ("context", po::value(&o->context)->value_name("NAME"),
     "Kubeconfig context to use (default: its current-context).")
    ("upstream", po::value(&o->upstreams)->value_name("URL")->composing(),
     "Upstream apiserver URL (https://HOST:PORT). Repeat for failover, tried in order. "
     "Overrides the kubeconfig's server.")
    ("events-upstream", po::value(&o->events_upstreams)->value_name("URL")->composing(),
     "Upstream for Events (core v1 and events.k8s.io/v1): their passthrough and their cache's "
     "LIST/WATCH go here, like the apiserver's --etcd-servers-overrides for events. Same TLS "
     "settings and credentials as the main upstream. Repeat for failover.")
    ("event-spam-filter", po::value(&o->event_spam_filter)->value_name("BOOL")->default_value(true),
     "Refuse (429) Event creations past a per-source, per-object budget (25, then one per 5 "
     "minutes, as client-go's event spam filter).")
    ("coalesce-reads", po::value(&o->coalesce_reads)->value_name("BOOL")->default_value(true),
     "Identical concurrent passthrough GET/LIST requests (same request, same credentials) "
     "share one upstream call; a request only joins a call that starts after it arrived.")
    ("upstream-ca-file", po::value(&o->upstream_ca_file)->value_name("PATH"),
     "PEM CA bundle trusted for the upstream's serving certificate.")
    ("upstream-token-file", po::value(&o->upstream_token_file)->value_name("PATH"),
     "Bearer token file for kube-fanout's own upstream requests (never used for clients' "
     "requests, which carry their own credentials).")
    ("upstream-insecure-skip-tls-verify",
     po::bool_switch(&o->upstream_insecure_skip_tls_verify),
     "Do not verify the upstream's certificate (testing only).")
    ("upstream-dial-timeout", po::value(dial)->value_name("DURATION")->default_value("10s"),
     "Timeout for connecting to an upstream endpoint before failing over.")
    ("upstream-http2", po::value(&o->upstream_http2)->value_name("BOOL")->default_value(true),
     "Passthrough requests without a body or an upgrade share HTTP/2 connections to the "
     "upstream (TLS, ALPN h2), as many streams on each as the upstream allows (kube-apiserver: "
     "100), one set of connections per credential kube-fanout presents (none, or its "
     "front-proxy certificate); false: one HTTP/1.1 connection per request in flight. Upgrades "
     "(exec, attach, port-forward) and requests with a body always use HTTP/1.1.")
    ("upstream-watch-idle-timeout",
     po::value(watch_idle)->value_name("DURATION")->default_value("2m"),
     "How long a cache's upstream watch may stay silent (no event, no bookmark, no byte) before "
     "it is taken for dead, dropped and resumed from the cache's resourceVersion. The apiserver "
     "sends a bookmark about every minute. At least 1s.")
    ("cache-resources", po::value<std::string>()->value_name("LIST")->implicit_value(""),
     "Comma-separated resources served from the cache, as RESOURCE[.GROUP/VERSION] "
     "(e.g. pods,endpointslices.discovery.k8s.io/v1,widgets.example.com/v1). Default: pods, "
     "nodes, services, namespaces, configmaps, endpointslices, events (v1 and events.k8s.io/v1), "
     "csidrivers, runtimeclasses, servicecidrs. "
     "Empty: pass everything through.")
    ("watch-cache-window-bytes", po::value(&o->watch_cache_window_bytes)->value_name("BYTES")
         ->default_value(256u << 20),
     "Per resource, the bytes of recent events kept to resume watches from (at least 75 s of "
     "history unless this bound is hit first).")
    ("watcher-max-queue-bytes", po::value(&o->watcher_max_queue_bytes)->value_name("BYTES")
         ->default_value(8u << 20),
     "Per watcher, the bytes that may wait unsent; a watch past it is closed and its client "
     "resumes from its last resourceVersion.")
    ("watchers-max-total-queue-bytes",
     po::value(&o->watchers_max_total_queue_bytes)->value_name("BYTES")->default_value(1u << 30),
     "All watchers together, the memory their unsent events may hold (each event's object once "
     "while any watcher's queue holds it, plus 104 bytes per event queued to each); past it the watches furthest behind are closed, largest queue first, and their "
     "clients resume. A watcher that has caught up always gets the next event. 0: unlimited.")
    ("max-watchers", po::value(&o->max_watchers)->value_name("N")->default_value(100000),
     "Watches served from the cache open at once (exempt clients aside); past it a new one is "
     "answered 429 with Retry-After, as the apiserver answers when overloaded. 0: unlimited.")
    ("max-watchers-per-user", po::value(&o->max_watchers_per_user)->value_name("N")
         ->default_value(0),
     "Watches served from the cache open at once per user (exempt clients aside); past it: 429 "
     "with Retry-After. 0: unlimited.")
    ("http2-max-streams-per-connection",
     po::value(&o->http2_max_streams_per_connection)->value_name("N")->default_value(0),
     "The most concurrent streams a client's HTTP/2 connection may have (announced in SETTINGS; "
     "the connection's flow-control window is 256 KiB per stream). 0: the apiserver's default, "
     "100.")
    ("http2-header-block-timeout",
     po::value(&raw->http2_header_block)->value_name("DURATION")->default_value("30s"),
     "An HTTP/2 header block (HEADERS and its CONTINUATIONs) must end within this of its first "
     "frame, as an HTTP/1.1 head must; past it the connection gets GOAWAY and is closed.")
    ("http2-max-continuations",
     po::value(&o->http2_max_continuations)->value_name("N")->default_value(8),
     "CONTINUATION frames allowed after one HTTP/2 HEADERS frame; past it: GOAWAY "
     "ENHANCE_YOUR_CALM.")
    ("http2-max-header-bytes-per-connection",
     po::value(&o->http2_max_header_bytes_per_connection)->value_name("BYTES")
         ->default_value(4 * ((1u << 20) + 320)),
     "Request heads (name, value and 32 bytes per field, as Go counts) one HTTP/2 connection's "
     "requests under way may hold together; a head past what is left is answered 431.")
    ("http2-stream-reset-burst",
     po::value(&o->http2_stream_reset_burst)->value_name("N")->default_value(1000),
     "HTTP/2 stream resets by a client (RST_STREAM, or its protocol errors) allowed at once; "
     "past it and --http2-stream-reset-rate: GOAWAY ENHANCE_YOUR_CALM.")
    ("http2-stream-reset-rate",
     po::value(&o->http2_stream_reset_rate)->value_name("N")->default_value(33),
     "HTTP/2 stream resets per second a client regains, up to --http2-stream-reset-burst.")
    ("watch-bookmark-interval", po::value(bookmark)->value_name("DURATION")->default_value("1m"),
     "How often watches that allow bookmarks get one (the apiserver's cadence is 1m); one also "
     "goes 2s before a watch's timeout.")
    ("consistent-read-passthrough-interval",
     po::value(&raw->consistent_passthrough)->value_name("DURATION")->default_value("1s"),
     "A consistent read (a LIST or GET without resourceVersion) of a cached resource is served "
     "from the cache once the cache is proven current, which on a quiet resource takes the "
     "apiserver's bookmark timer (1-2s). One such read per resource per this interval goes to "
     "the apiserver at once instead, so an occasional reader (kubectl) waits no longer than "
     "direct; the others are proven and served from the cache. 0: never.")
    ("cache-snapshot-dir", po::value(&o->cache_snapshot_dir)->value_name("PATH"),
     "Warm restart: keep each cached resource's objects and event window in this directory "
     "(created 0700; refused if group or others may access it) and, on start, serve from them "
     "at once and watch the upstream from their resourceVersion instead of listing. Secrets "
     "are not written unless --cache-snapshot-secrets. See docs/snapshot.md.")
    ("cache-snapshot-max-bytes", po::value(&o->cache_snapshot_max_bytes)->value_name("BYTES")
         ->default_value(256u << 20),
     "Per resource, the largest snapshot written: past it the window's oldest events are left "
     "out, and a resource whose objects alone exceed it is not written.")
    ("cache-snapshot-interval",
     po::value(&raw->snapshot_interval)->value_name("DURATION")->default_value("10s"),
     "At most one snapshot write per resource per interval (only of resources that changed); "
     "one more on a graceful stop.")
    ("cache-snapshot-max-age",
     po::value(&raw->snapshot_max_age)->value_name("DURATION")->default_value("10m"),
     "A snapshot written longer ago than this is ignored at start (the resource lists).")
    ("cache-snapshot-secrets",
     po::value(&o->cache_snapshot_secrets)->value_name("BOOL")->default_value(false),
     "Write snapshots of Secrets too (when secrets are in --cache-resources).")
    ("enable-admission", po::value(&o->enable_admission)->value_name("BOOL")->default_value(true),
     "Admit requests by flow and priority level (fair queues, token buckets for polling "
     "clients; over the limits: 429 with Retry-After), as configured by --admission-config.")
    ("admission-config", po::value(&o->admission_config)->value_name("PATH"),
     "AdmissionConfiguration YAML (kube-fanout.io/v1alpha1; see ratelimit/README.md), "
     "re-read when it changes; a bad file is logged and the previous configuration kept. "
     "Default: built-in priority levels and flow schemas.")
    ("max-passthrough-in-flight", po::value(&o->max_passthrough_in_flight)->value_name("N")
         ->default_value(400),
     "Passthrough requests (not watches) in flight to the upstream at once, for all but "
     "exempt clients; past it: 429. 0: unlimited.")
    ("max-passthrough-watches", po::value(&o->max_passthrough_watches)->value_name("N")
         ->default_value(10000),
     "Watches passed through to the upstream and tunnels (exec, attach, port-forward) open at "
     "once, exempt clients aside (a watch is a stream of a shared upstream HTTP/2 connection, "
     "a tunnel holds a connection of its own). Past it a new one is "
     "answered 429 with Retry-After. 0: unlimited.")
    ("max-passthrough-watches-per-user",
     po::value(&o->max_passthrough_watches_per_user)->value_name("N")->default_value(100),
     "The same per identity (a user; a bound ServiceAccount token's pod on its own): past it, "
     "429 with Retry-After. 0: unlimited.")
    ("threads", po::value(&o->threads)->value_name("N")->default_value(0),
     "I/O threads; 0 means one per core.")
    ("io-uring", po::value(&o->io_uring)->value_name("BOOL")->default_value(true),
     "Send the watch events of one fan-out burst (HTTP/1.1 and HTTP/2, plain or TLS) as io_uring submissions "
     "(up to 256 sockets' writes per system call) when the kernel and the seccomp profile allow "
     "io_uring; else, or false, one write per socket.")
    ("shutdown-grace-period", po::value(grace)->value_name("DURATION")->default_value("30s"),
     "On SIGTERM/SIGINT: stop accepting, end watches cleanly, and give other in-flight "
     "requests this long to finish.")
    ("list-threads", po::value(&o->list_threads)->value_name("N")->default_value(1),
     "Threads, at a lower CPU priority than the I/O threads, that build cached LISTs of "
     "resources with many objects and compress large answers, so that a large LIST does not "
     "hold up the watches served beside it. 0: the I/O threads build and compress them.")
    ("list-gzip-cache-bytes",
     po::value(&o->list_gzip_cache_bytes)->value_name("BYTES")->default_value(64u << 20),
     "Compressed LIST answers kept to be shared by the clients that ask for the same list at "
     "the same resourceVersion (compressed once, not per answer); least recently used first "
     "out. 0: every answer is compressed anew.")
    ("v", po::value(&o->verbosity)->value_name("N")->default_value(0),
     "Log verbosity: 0 requests and warnings, 4 and above adds debug lines.")
    ("config", po::value(&o->config_file)->value_name("PATH"),
     "YAML file of flags: their names as keys (a list for a repeatable flag), e.g. "
     "\"secure-listen: 0.0.0.0:6443\". Flags on the command line win; unknown keys are errors.")
    ("version", po::bool_switch(&o->version), "Print the version and exit.")
    ("help,h", po::bool_switch(&o->help), "Print this help and exit.");
  // clang-format on
  return d;
}

// "--name=" (an empty value, as Kubernetes flags allow) becomes "--name", which Boost reads as
// the option's implicit value; Boost rejects the former.
void EmptyValueToImplicit(std::string& a) {
  if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
    a.pop_back();
  }
}

// --help's topics, in order; a flag named in none is listed under "Other flags".
struct Topic {
  const char* title;
  std::vector<std::string_view> flags;
};
const std::vector<Topic>& Topics() {
  static const auto* topics = new std::vector<Topic>{
      {"Listener",
       {"listen", "secure-listen", "tls-cert-file", "tls-private-key-file", "tls-cipher-suites",
        "tls-min-version", "metrics-listen", "allow-insecure-listen",
        "http2-max-streams-per-connection", "http2-header-block-timeout", "http2-max-continuations",
        "http2-max-header-bytes-per-connection", "http2-stream-reset-burst",
        "http2-stream-reset-rate"}},
      {"Client authentication and authorization",
       {"client-ca-file", "requestheader-client-ca-file", "requestheader-allowed-names",
        "proxy-client-cert-file", "proxy-client-key-file", "requestheader-username-headers",
        "requestheader-group-headers", "requestheader-uid-headers",
        "requestheader-extra-headers-prefix", "authentication-token-webhook-cache-ttl",
        "authentication-token-webhook-cache-unauthorized-ttl",
        "authorization-webhook-cache-authorized-ttl",
        "authorization-webhook-cache-unauthorized-ttl", "authentication-token-review-qps",
        "authentication-cache-max-entries", "authorization-cache-max-entries"}},
      {"Upstream",
       {"kubeconfig", "context", "upstream", "events-upstream", "upstream-ca-file",
        "upstream-token-file", "upstream-insecure-skip-tls-verify", "upstream-dial-timeout",
        "upstream-http2", "upstream-watch-idle-timeout"}},
      {"Cache",
       {"cache-resources", "watch-cache-window-bytes", "watcher-max-queue-bytes",
        "watchers-max-total-queue-bytes", "max-watchers", "max-watchers-per-user",
        "watch-bookmark-interval", "consistent-read-passthrough-interval", "cache-snapshot-dir",
        "cache-snapshot-max-bytes", "cache-snapshot-interval", "cache-snapshot-max-age",
        "cache-snapshot-secrets", "list-threads", "list-gzip-cache-bytes"}},
      {"Admission and passthrough",
       {"enable-admission", "admission-config", "max-passthrough-in-flight",
        "max-passthrough-watches", "max-passthrough-watches-per-user", "event-spam-filter",
        "coalesce-reads"}},
      {"Process",
       {"config", "threads", "io-uring", "shutdown-grace-period", "v", "version", "help"}},
  };
  return *topics;
}

absl::Status ParseDurationFlag(std::string_view name, const std::string& text,
                               absl::Duration* out) {
  if (!absl::ParseDuration(text, out) || *out < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid argument \"", text, "\" for \"--",
                                                   ToAbsl(name), "\" flag: not a duration"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HostPort> HostPort::Parse(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", ToAbsl(text), "\" is not HOST:PORT"));
  }
  HostPort hp;
  absl::string_view host = ToAbsl(text.substr(0, colon));
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", ToAbsl(text), "\" has a bad IPv6 host"));
  }
  hp.host = host.empty() ? "0.0.0.0" : std::string(host);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(ToAbsl(text.substr(colon + 1)), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", ToAbsl(text), "\" has a bad port"));
  }
  hp.port = static_cast<uint16_t>(port);
  return hp;
}

absl::StatusOr<ProxyOptions> ParseFlags(int argc, const char* const* argv) {
  ProxyOptions o;
  RawFlags raw;
  po::options_description desc = Describe(&o, &raw);
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  for (std::string& a : args) EmptyValueToImplicit(a);
  try {
    constexpr int kStyle =
        po::command_line_style::unix_style | po::command_line_style::allow_long_disguise;
    po::variables_map vm;
    const po::parsed_options given =
        po::command_line_parser(args).options(desc).style(kStyle).run();
    po::store(given, vm);
    if (vm.count("config")) {
      std::set<std::string> on_command_line;
      for (const po::option& opt : given.options) on_command_line.insert(opt.string_key);
      auto file_args = ReadConfigFileArgs(vm["config"].as<std::string>(), desc, on_command_line);
      if (!file_args.ok()) return file_args.status();
      for (std::string& a : *file_args) EmptyValueToImplicit(a);
      po::store(po::command_line_parser(*file_args).options(desc).style(kStyle).run(), vm);
    }
    po::notify(vm);
    if (vm.count("cache-resources")) {
      o.cache_resources_set = true;
      for (absl::string_view r :
           absl::StrSplit(vm["cache-resources"].as<std::string>(), ',', absl::SkipWhitespace())) {
        o.cache_resources.emplace_back(absl::StripAsciiWhitespace(r));
      }
    }
  } catch (const po::error& e) {
    return absl::InvalidArgumentError(e.what());
  }
  const std::pair<const char*, std::pair<const std::string*, absl::Duration*>> durations[] = {
      {"shutdown-grace-period", {&raw.grace, &o.shutdown_grace_period}},
      {"upstream-dial-timeout", {&raw.dial, &o.upstream_dial_timeout}},
      {"upstream-watch-idle-timeout", {&raw.watch_idle, &o.upstream_watch_idle_timeout}},
      {"watch-bookmark-interval", {&raw.bookmark, &o.watch_bookmark_interval}},
      {"consistent-read-passthrough-interval",
       {&raw.consistent_passthrough, &o.consistent_read_passthrough_interval}},
      {"cache-snapshot-interval", {&raw.snapshot_interval, &o.cache_snapshot_interval}},
      {"cache-snapshot-max-age", {&raw.snapshot_max_age, &o.cache_snapshot_max_age}},
      {"http2-header-block-timeout", {&raw.http2_header_block, &o.http2_header_block_timeout}},
      {"authentication-token-webhook-cache-ttl", {&raw.authn_ttl, &o.authentication_cache_ttl}},
      {"authentication-token-webhook-cache-unauthorized-ttl",
       {&raw.authn_negative_ttl, &o.authentication_cache_unauthorized_ttl}},
      {"authorization-webhook-cache-authorized-ttl",
       {&raw.authz_ttl, &o.authorization_cache_authorized_ttl}},
      {"authorization-webhook-cache-unauthorized-ttl",
       {&raw.authz_negative_ttl, &o.authorization_cache_unauthorized_ttl}},
  };
  for (const auto& [name, d] : durations) {
    if (auto s = ParseDurationFlag(name, *d.first, d.second); !s.ok()) return s;
  }
  // Lists accept commas too (--requestheader-group-headers=X-A,X-B), as pflag's string slices.
  for (auto* list : {&o.requestheader_username_headers, &o.requestheader_group_headers,
                     &o.requestheader_uid_headers, &o.requestheader_extra_headers_prefix,
                     &o.requestheader_allowed_names, &o.tls_cipher_suites}) {
    std::vector<std::string> split;
    for (const std::string& item : *list) {
      for (absl::string_view v : absl::StrSplit(item, ',', absl::SkipWhitespace())) {
        split.emplace_back(absl::StripAsciiWhitespace(v));
      }
    }
    *list = std::move(split);
  }
  if (o.watch_bookmark_interval < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("--watch-bookmark-interval must be at least 100ms");
  }
  if (o.consistent_read_passthrough_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--consistent-read-passthrough-interval must not be negative");
  }
  if (o.upstream_watch_idle_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--upstream-watch-idle-timeout must be at least 1s");
  }
  if (o.cache_snapshot_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--cache-snapshot-interval must be at least 1s");
  }
  if (o.listen.empty() && o.secure_listen.empty()) o.listen = "127.0.0.1:8001";
  return o;
}

std::string HelpText() {
  ProxyOptions o;
  RawFlags raw;
  std::ostringstream out;
  out << "kube-fanout: a watch-caching proxy for the Kubernetes API server.\n\n"
      << "Usage:\n  kube-fanout [flags]\n\n"
      << "Upstream: --upstream URLs, else --kubeconfig, else the in-cluster ServiceAccount,\n"
      << "else $KUBECONFIG. Clients' requests pass through with their own credentials.\n\n"
      << "Flags on the command line win over those read from --config.\n";
  const po::options_description all = Describe(&o, &raw);
  std::vector<po::options_description> groups;
  for (const Topic& t : Topics()) groups.emplace_back(std::string(t.title) + " flags", 100, 50);
  po::options_description other("Other flags", 100, 50);
  for (const auto& flag : all.options()) {
    po::options_description* group = &other;
    for (size_t i = 0; i < Topics().size(); ++i) {
      const auto& names = Topics()[i].flags;
      if (std::find(names.begin(), names.end(), flag->long_name()) != names.end()) {
        group = &groups[i];
      }
    }
    group->add(flag);
  }
  for (const auto& g : groups) out << "\n" << g;
  if (!other.options().empty()) out << "\n" << other;
  return out.str();
}

absl::Status Validate(const ProxyOptions& o) {
  for (const std::string* addr : {&o.listen, &o.secure_listen, &o.metrics_listen}) {
    if (addr->empty()) continue;
    if (auto hp = HostPort::Parse(*addr); !hp.ok()) return hp.status();
  }
  if (!o.listen.empty() && !o.allow_insecure_listen) {
    boost::system::error_code ec;
    const auto ip = boost::asio::ip::make_address(HostPort::Parse(o.listen)->host, ec);
    if (ec || !ip.is_loopback()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", o.listen,
          " is not a loopback address: it would serve the API over plain HTTP, clients' bearer "
          "tokens in clear text. Serve the API with --secure-listen, bind --listen to "
          "127.0.0.1 or [::1], put probes and Prometheus on --metrics-listen, or pass "
          "--allow-insecure-listen to do it anyway"));
    }
  }
  if (!o.secure_listen.empty() && (o.tls_cert_file.empty() || o.tls_private_key_file.empty())) {
    return absl::InvalidArgumentError(
        "--secure-listen needs --tls-cert-file and --tls-private-key-file");
  }
  if (o.secure_listen.empty() && (!o.tls_cert_file.empty() || !o.tls_private_key_file.empty())) {
    return absl::InvalidArgumentError(
        "--tls-cert-file/--tls-private-key-file need --secure-listen");
  }
  if (auto ciphers = OpenSslCipherList(o.tls_cipher_suites); !ciphers.ok()) {
    return ciphers.status();
  }
  if (auto version = TlsVersion(o.tls_min_version); !version.ok()) return version.status();
  if (!o.client_ca_file.empty() && o.secure_listen.empty()) {
    return absl::InvalidArgumentError("--client-ca-file needs --secure-listen");
  }
  if (o.proxy_client_cert_file.empty() != o.proxy_client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--proxy-client-cert-file and --proxy-client-key-file go together");
  }
  if (!o.requestheader_client_ca_file.empty() &&
      (o.secure_listen.empty() || o.proxy_client_cert_file.empty())) {
    return absl::InvalidArgumentError(
        "--requestheader-client-ca-file needs --secure-listen and --proxy-client-cert-file: "
        "the users front proxies name reach the apiserver through its front proxy");
  }
  if (!o.client_ca_file.empty() && o.proxy_client_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--client-ca-file needs --proxy-client-cert-file and --proxy-client-key-file: users "
        "authenticated by a client certificate reach the apiserver through its front proxy");
  }
  if (o.authentication_token_review_qps < 0) {
    return absl::InvalidArgumentError("--authentication-token-review-qps must be 0 or more");
  }
  if (o.authentication_cache_max_entries < 1 || o.authorization_cache_max_entries < 1) {
    return absl::InvalidArgumentError(
        "--authentication-cache-max-entries and --authorization-cache-max-entries must be at "
        "least 1");
  }
  if (o.threads < 0) return absl::InvalidArgumentError("--threads must be 0 or more");
  if (o.max_passthrough_in_flight < 0) {
    return absl::InvalidArgumentError("--max-passthrough-in-flight must be 0 or more");
  }
  if (o.max_passthrough_watches < 0 || o.max_passthrough_watches_per_user < 0) {
    return absl::InvalidArgumentError(
        "--max-passthrough-watches and --max-passthrough-watches-per-user must be 0 or more");
  }
  if (o.max_watchers < 0 || o.max_watchers_per_user < 0) {
    return absl::InvalidArgumentError(
        "--max-watchers and --max-watchers-per-user must be 0 or more");
  }
  if (o.list_threads < 0) return absl::InvalidArgumentError("--list-threads must be 0 or more");
  return absl::OkStatus();
}

absl::StatusOr<UpstreamConfig> ResolveUpstream(const ProxyOptions& o) {
  absl::StatusOr<UpstreamConfig> cfg = absl::NotFoundError("");
  if (!o.kubeconfig.empty()) {
    cfg = LoadKubeconfig(o.kubeconfig, o.context);
  } else if (o.upstreams.empty()) {
    cfg = InClusterConfig();
    if (absl::IsNotFound(cfg.status())) {
      const char* env = std::getenv("KUBECONFIG");
      if (env == nullptr || *env == '\0') {
        return absl::InvalidArgumentError(
            "no upstream: pass --upstream=URL or --kubeconfig=PATH, run in a pod, or set "
            "$KUBECONFIG");
      }
      // Like kubectl, the first file of a colon-separated $KUBECONFIG.
      cfg = LoadKubeconfig(
          std::string(std::string_view(env).substr(0, std::string_view(env).find(':'))), o.context);
    }
  } else {
    cfg = UpstreamConfig{};
    cfg->source = "flags";
  }
  if (!cfg.ok()) return cfg.status();
  if (!o.upstreams.empty()) {
    cfg->endpoints.clear();
    for (const std::string& url : o.upstreams) {
      auto ep = UpstreamEndpoint::Parse(url);
      if (!ep.ok()) return ep.status();
      cfg->endpoints.push_back(*std::move(ep));
    }
  }
  if (!o.upstream_ca_file.empty()) {
    auto pem = ReadFile(o.upstream_ca_file);
    if (!pem.ok()) return pem.status();
    cfg->ca_pem = *std::move(pem);
  }
  if (!o.upstream_token_file.empty()) {
    cfg->token.clear();
    cfg->token_file = o.upstream_token_file;
  }
  if (o.upstream_insecure_skip_tls_verify) cfg->insecure_skip_tls_verify = true;
  return cfg;
}

}  // namespace kf
