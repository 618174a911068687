#include "proxy/server/flags.h"

namespace kf::flags {
namespace po = boost::program_options;
namespace {

// Listener flags: one of --help's topics (Topics, below).
void ListenerFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
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
    ("http2-max-streams-per-connection",
     po::value(&o->http2_max_streams_per_connection)->value_name("N")->default_value(0),
     "The most concurrent streams a client's HTTP/2 connection may have (announced in SETTINGS; "
     "the connection's flow-control window is 256 KiB per stream). 0: the apiserver's default, "
     "100.")
    ("request-timeout", po::value(&raw->request_timeout)->value_name("DURATION")->default_value("1m0s"),
     "As the apiserver's flag of that name (set it to the upstream's value): a request's body must "
     "arrive whole within this of its head, or the request is answered 504 with the apiserver's "
     "Timeout Status (kube_fanout_request_body_timeouts_total).");
  // clang-format on
}

// HTTP/2 bounds of the listeners: part of the Listener topic (Topics, below).
void Http2Flags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
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
    ("http2-frame-buffer-release-after",
     po::value(&raw->http2_frame_buffer_release)->value_name("DURATION")->default_value("5s"),
     "An HTTP/2 connection that framed nothing for this long (between two looks, so up to "
     "twice it) gives the pages of its 16 KiB frame buffer back to the kernel until its next "
     "frame: a quiet agent's connection holds none. 0: never.")
    ("http2-stream-reset-burst",
     po::value(&o->http2_stream_reset_burst)->value_name("N")->default_value(1000),
     "HTTP/2 stream resets by a client (RST_STREAM, or its protocol errors) allowed at once; "
     "past it and --http2-stream-reset-rate: GOAWAY ENHANCE_YOUR_CALM.")
    ("http2-stream-reset-rate",
     po::value(&o->http2_stream_reset_rate)->value_name("N")->default_value(33),
     "HTTP/2 stream resets per second a client regains, up to --http2-stream-reset-burst.");
  // clang-format on
}

// Client authentication and authorization flags: one of --help's topics (Topics, below).
void IdentityFlags(po::options_description& d, ProxyOptions* o, RawFlags* /*raw*/) {
  // clang-format off
  d.add_options()
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
     "Request-header field prefixes for extra user attributes. Default X-Remote-Extra-.");
  // clang-format on
}

// Client authentication and authorization flags, continued: the TokenReview and SubjectAccessReview
// caches.
void ReviewFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
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
     "SubjectAccessReview answers kept (one cache for all I/O threads); past it the entries "
     "nearest expiry go first.")
    ("authorization-share-node-reviews",
     po::value(&o->authorization_share_node_reviews)->value_name("BOOL")->default_value(true),
     "A node identity's (system:node:NAME in system:nodes) cached read is allowed by one review "
     "per request shape for all nodes in the same groups: the question with the node's name "
     "replaced is asked for a probe node named at start, in those groups, whose yes is every "
     "such node's (the Node authorizer and RBAC never deny by name); its no sends the node's "
     "own review. Turn off when an authorizer "
     "denies by node name (a webhook, an authorization config's deny rule): docs/security.md.");
  // clang-format on
}

// Upstream flags: one of --help's topics (Topics, below).
void UpstreamFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
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
    ("upstream-ca-file", po::value(&o->upstream_ca_file)->value_name("PATH"),
     "PEM CA bundle trusted for the upstream's serving certificate.")
    ("upstream-token-file", po::value(&o->upstream_token_file)->value_name("PATH"),
     "Bearer token file for kube-fanout's own upstream requests (never used for clients' "
     "requests, which carry their own credentials).")
    ("upstream-insecure-skip-tls-verify",
     po::bool_switch(&o->upstream_insecure_skip_tls_verify),
     "Do not verify the upstream's certificate (testing only).")
    ("upstream-dial-timeout", po::value(&raw->dial)->value_name("DURATION")->default_value("10s"),
     "Timeout for connecting to an upstream endpoint before failing over.")
    ("upstream-http2", po::value(&o->upstream_http2)->value_name("BOOL")->default_value(true),
     "Passthrough requests without a body or an upgrade share HTTP/2 connections to the "
     "upstream (TLS, ALPN h2), as many streams on each as the upstream allows (kube-apiserver: "
     "100), one set of connections per credential kube-fanout presents (none, or its "
     "front-proxy certificate); false: one HTTP/1.1 connection per request in flight. Upgrades "
     "(exec, attach, port-forward) and requests with a body always use HTTP/1.1.")
    ("upstream-watch-idle-timeout",
     po::value(&raw->watch_idle)->value_name("DURATION")->default_value("2m"),
     "How long a cache's upstream watch may stay silent (no event, no bookmark, no byte) before "
     "it is taken for dead, dropped and resumed from the cache's resourceVersion. The apiserver "
     "sends a bookmark about every minute. At least 1s.");
  // clang-format on
}

// Cache flags: one of --help's topics (Topics, below).
void CacheFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
    ("cache-resources", po::value<std::string>()->value_name("LIST")->implicit_value(""),
     "Comma-separated resources served from the cache, as RESOURCE[.GROUP/VERSION] "
     "(e.g. pods,endpointslices.discovery.k8s.io/v1,widgets.example.com/v1). Default: pods, "
     "nodes, services, namespaces, configmaps, endpointslices, events (v1 and events.k8s.io/v1), "
     "csidrivers, runtimeclasses, servicecidrs. "
     "Empty: pass everything through.")
    ("protobuf-cache-resources",
     po::value(&o->protobuf_cache_resources)->value_name("LIST")
         ->default_value(o->protobuf_cache_resources)->implicit_value(""),
     "Cached resources (same form as --cache-resources) whose protobuf cache starts at once with "
     "the JSON one; the others' protobuf caches start at the first protobuf request of a user "
     "allowed to read them. A cache started late holds no history from before it started, so "
     "a protobuf watch resuming from an earlier resourceVersion waits while it is fetched from "
     "the apiserver (about a second), or gets 410 when its selector cannot be answered from "
     "it. For node agents (kubelet and kube-proxy ask in protobuf): pods,nodes,services,"
     "configmaps,"
     "endpointslices.discovery.k8s.io/v1,csidrivers.storage.k8s.io/v1,"
     "runtimeclasses.node.k8s.io/v1,servicecidrs.networking.k8s.io/v1 (the in-cluster manifests "
     "set it). Each costs a second upstream LIST and WATCH. Default empty: all on first use.")
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
         ->default_value(o->max_watchers_per_user),
     "Watches served from the cache open at once per user, and per pod for a bound "
     "ServiceAccount token (each pod of a DaemonSet its own count), exempt clients aside; past "
     "it: 429 with Retry-After. A kubelet holds tens to a few hundred (one per ConfigMap and "
     "Secret its pods use). 0: unlimited.")
    ("watch-bookmark-interval", po::value(&raw->bookmark)->value_name("DURATION")->default_value("1m"),
     "How often watches that allow bookmarks get one (the apiserver's cadence is 1m); one also "
     "goes 2s before a watch's timeout.");
  // clang-format on
}

// Cache flags, continued: consistent reads and self-checks.
void FreshnessFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
    ("consistent-read-passthrough-interval",
     po::value(&raw->consistent_passthrough)->value_name("DURATION")->default_value("1s"),
     "A consistent read (a LIST or GET without resourceVersion) of a cached resource is served "
     "from the cache once a shared consistent LIST proves the cache current (by content under "
     "500 objects; larger quiet resources wait for the apiserver's bookmark timer, 1-2s). One "
     "such read per resource per this interval goes to the apiserver at once instead, so an "
     "occasional reader (kubectl) waits no longer than direct; the others are proven and served "
     "from the cache. 0: never.")
    ("consistent-get-passthrough-qps",
     po::value(&o->consistent_get_passthrough_qps)->value_name("N")->default_value(50),
     "Besides, consistent GETs of one object of a cached resource go to the apiserver at once "
     "while they come at fewer than N a second per resource (counted over about the last second, "
     "passed or not): a GET costs the apiserver one object's read, less than the proof that "
     "would serve it from the cache (a LIST) when few reads share that proof, and it waits for "
     "no proof (a kubelet GETs each pod before it writes the pod's status, one pod after "
     "another). Faster, they share proofs and are served from the cache: a storm costs the "
     "apiserver at most N GETs at its start. 0: only the interval's turn.")
    ("cache-check-interval",
     po::value(&raw->cache_check)->value_name("DURATION")->default_value("5m"),
     "How often each cache checks itself, as the apiserver's DetectCacheInconsistency checks "
     "its watch cache: the names, namespaces and resourceVersions of its objects are compared "
     "with the upstream's list at the cache's exact resourceVersion (metadata only, 500 objects "
     "a page); a cache that differs is logged, counted "
     "(kube_fanout_cache_inconsistencies_total) and relisted. One check at a time, spread over "
     "the interval; never before a cache has synced. 0: never.");
  // clang-format on
}

// Cache flags, continued: warm restarts (snapshots) and large lists.
void SnapshotFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
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
    ("list-threads", po::value(&o->list_threads)->value_name("N")->default_value(1),
     "Threads, at a lower CPU priority than the I/O threads, that build cached LISTs of "
     "resources with many objects and compress large answers, so that a large LIST does not "
     "hold up the watches served beside it. 0: the I/O threads build and compress them.")
    ("list-gzip-cache-bytes",
     po::value(&o->list_gzip_cache_bytes)->value_name("BYTES")->default_value(64u << 20),
     "Compressed LIST answers kept to be shared by the clients that ask for the same list at "
     "the same resourceVersion (compressed once, not per answer); least recently used first "
     "out. 0: every answer is compressed anew.")
    ("watchlist-gzip",
     po::value(&o->watchlist_gzip)->value_name("auto|always|never")->default_value("auto"),
     "Compress the cache's answers to WatchList requests (sendInitialEvents, with bookmarks) "
     "whose Accept-Encoding asks for gzip, as Kubernetes 1.37's WatchListCompression does: "
     "auto when the upstream compresses its own (asked once per resource, on the first such "
     "request; plain until it has answered), always, or never.");
  // clang-format on
}

// Admission and passthrough flags: one of --help's topics (Topics, below).
void AdmissionFlags(po::options_description& d, ProxyOptions* o, RawFlags* /*raw*/) {
  // clang-format off
  d.add_options()
    ("event-spam-filter", po::value(&o->event_spam_filter)->value_name("BOOL")->default_value(true),
     "Refuse (429) Event creations past a per-source, per-object budget (25, then one per 5 "
     "minutes, as client-go's event spam filter).")
    ("coalesce-reads", po::value(&o->coalesce_reads)->value_name("BOOL")->default_value(true),
     "Identical concurrent passthrough GET/LIST requests (same request, same credentials) "
     "share one upstream call; a request only joins a call that starts after it arrived.")
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
     "429 with Retry-After. 0: unlimited.");
  // clang-format on
}

// Process flags: one of --help's topics (Topics, below).
void ProcessFlags(po::options_description& d, ProxyOptions* o, RawFlags* raw) {
  // clang-format off
  d.add_options()
    ("threads", po::value(&o->threads)->value_name("N")->default_value(0),
     "I/O threads; 0 means one per core.")
    ("io-uring", po::value(&o->io_uring)->value_name("BOOL")->default_value(true),
     "Send the watch events of one fan-out burst (HTTP/1.1 and HTTP/2, plain or TLS) as io_uring submissions "
     "(up to 256 sockets' writes per system call) when the kernel and the seccomp profile allow "
     "io_uring; else, or false, one write per socket.")
    ("shutdown-delay-duration", po::value(&raw->shutdown_delay)->value_name("DURATION")->default_value("0s"),
     "On SIGTERM/SIGINT: /readyz fails at once while everything else is served normally for "
     "this long (so load balancers and Services stop sending new connections), then the "
     "graceful stop. The pod's terminationGracePeriodSeconds must cover this, "
     "--shutdown-watch-termination-grace-period and --shutdown-grace-period.")
    ("shutdown-watch-termination-grace-period",
     po::value(&raw->watch_termination)->value_name("DURATION")->default_value("0s"),
     "In the graceful stop, once the listeners are closed: end the connections open then (and "
     "so their watches) a share at a time over this long, the caches still serving those not "
     "yet ended, so their clients come back to the other replicas at a bounded rate; 0 ends "
     "them all at once. The apiserver's flag of that name.")
    ("shutdown-grace-period", po::value(&raw->grace)->value_name("DURATION")->default_value("30s"),
     "On SIGTERM/SIGINT: stop accepting, end watches cleanly, and give other in-flight "
     "requests this long to finish.")
    ("heap-trim-interval", po::value(&raw->heap_trim)->value_name("DURATION")->default_value("10s"),
     "How often the heap is looked at: once the bytes free in malloc's arenas have grown 8 MiB "
     "past their lowest (a connect storm's handshakes and lists, a fleet that left), their "
     "pages are given back to the kernel (malloc_trim). 0: never.")
    ("v", po::value(&o->verbosity)->value_name("N")->default_value(0),
     "Log verbosity: 0 requests and warnings, 4 and above adds debug lines.")
    ("config", po::value(&o->config_file)->value_name("PATH"),
     "YAML file of flags: their names as keys (a list for a repeatable flag), e.g. "
     "\"secure-listen: 0.0.0.0:6443\". Flags on the command line win; unknown keys are errors.")
    ("version", po::bool_switch(&o->version), "Print the version and exit.")
    ("help,h", po::bool_switch(&o->help), "Print this help and exit.");
  // clang-format on
}

}  // namespace

const std::vector<Topic>& Topics() {
  static const auto* topics = new std::vector<Topic>{
      {"Listener", {ListenerFlags, Http2Flags}},
      {"Client authentication and authorization", {IdentityFlags, ReviewFlags}},
      {"Upstream", {UpstreamFlags}},
      {"Cache", {CacheFlags, FreshnessFlags, SnapshotFlags}},
      {"Admission and passthrough", {AdmissionFlags}},
      {"Process", {ProcessFlags}},
  };
  return *topics;
}

po::options_description Describe(ProxyOptions* o, RawFlags* raw) {
  po::options_description d("Flags", /*line_length=*/100, /*min_description_length=*/50);
  for (const Topic& t : Topics()) {
    for (DeclareFlags declare : t.declare) declare(d, o, raw);
  }
  return d;
}

}  // namespace kf::flags
