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
#include "proxy/serve/watch_gzip.h"
#include "proxy/server/config_file.h"
#include "proxy/server/flags.h"

namespace kf {
namespace po = boost::program_options;
namespace {

// "--name=" (an empty value, as Kubernetes flags allow) becomes "--name", which Boost reads as
// the option's implicit value; Boost rejects the former.
void EmptyValueToImplicit(std::string& a) {
  if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
    a.pop_back();
  }
}

absl::Status ParseDurationFlag(std::string_view name, const std::string& text,
                               absl::Duration* out) {
  if (!absl::ParseDuration(text, out) || *out < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid argument \"", text, "\" for \"--",
                                                   ToAbsl(name), "\" flag: not a duration"));
  }
  return absl::OkStatus();
}

// The flags that take a duration ("1m30s", "0"), read after Boost into `o`.
absl::Status ParseDurations(const flags::RawFlags& raw, ProxyOptions& o) {
  const std::pair<const char*, std::pair<const std::string*, absl::Duration*>> durations[] = {
      {"shutdown-delay-duration", {&raw.shutdown_delay, &o.shutdown_delay_duration}},
      {"shutdown-watch-termination-grace-period",
       {&raw.watch_termination, &o.shutdown_watch_termination_grace_period}},
      {"shutdown-grace-period", {&raw.grace, &o.shutdown_grace_period}},
      {"upstream-dial-timeout", {&raw.dial, &o.upstream_dial_timeout}},
      {"upstream-watch-idle-timeout", {&raw.watch_idle, &o.upstream_watch_idle_timeout}},
      {"watch-bookmark-interval", {&raw.bookmark, &o.watch_bookmark_interval}},
      {"consistent-read-passthrough-interval",
       {&raw.consistent_passthrough, &o.consistent_read_passthrough_interval}},
      {"cache-check-interval", {&raw.cache_check, &o.cache_check_interval}},
      {"cache-snapshot-interval", {&raw.snapshot_interval, &o.cache_snapshot_interval}},
      {"cache-snapshot-max-age", {&raw.snapshot_max_age, &o.cache_snapshot_max_age}},
      {"http2-header-block-timeout", {&raw.http2_header_block, &o.http2_header_block_timeout}},
      {"request-timeout", {&raw.request_timeout, &o.request_timeout}},
      {"http2-frame-buffer-release-after",
       {&raw.http2_frame_buffer_release, &o.http2_frame_buffer_release_after}},
      {"heap-trim-interval", {&raw.heap_trim, &o.heap_trim_interval}},
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

namespace {

// Lists accept commas too (--requestheader-group-headers=X-A,X-B), as pflag's string slices.
void SplitCommaLists(ProxyOptions& o) {
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
}

// The durations' lower bounds.
absl::Status CheckDurations(const ProxyOptions& o) {
  if (o.watch_bookmark_interval < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("--watch-bookmark-interval must be at least 100ms");
  }
  if (o.consistent_read_passthrough_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--consistent-read-passthrough-interval must not be negative");
  }
  if (o.shutdown_delay_duration < absl::ZeroDuration() ||
      o.shutdown_watch_termination_grace_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--shutdown-delay-duration and --shutdown-watch-termination-grace-period must not be "
        "negative");
  }
  if (o.request_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--request-timeout must be at least 1s");
  }
  if (o.upstream_watch_idle_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--upstream-watch-idle-timeout must be at least 1s");
  }
  if (o.cache_snapshot_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--cache-snapshot-interval must be at least 1s");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProxyOptions> ParseFlags(int argc, const char* const* argv) {
  ProxyOptions o;
  flags::RawFlags raw;
  po::options_description desc = flags::Describe(&o, &raw);
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
  if (auto s = ParseDurations(raw, o); !s.ok()) return s;
  SplitCommaLists(o);
  if (auto s = CheckDurations(o); !s.ok()) return s;
  if (!ParseWatchListGzip(o.watchlist_gzip)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid argument \"", o.watchlist_gzip,
                                                   "\" for \"--watchlist-gzip\" flag: not one of "
                                                   "auto, always, never"));
  }
  if (o.listen.empty() && o.secure_listen.empty()) o.listen = "127.0.0.1:8001";
  return o;
}

std::string HelpText() {
  ProxyOptions o;
  flags::RawFlags raw;
  std::ostringstream out;
  out << "kube-fanout: a watch-caching proxy for the Kubernetes API server.\n\n"
      << "Usage:\n  kube-fanout [flags]\n\n"
      << "Upstream: --upstream URLs, else --kubeconfig, else the in-cluster ServiceAccount,\n"
      << "else $KUBECONFIG. Clients' requests pass through with their own credentials.\n\n"
      << "Flags on the command line win over those read from --config.\n";
  for (const flags::Topic& t : flags::Topics()) {
    po::options_description group(std::string(t.title) + " flags", 100, 50);
    for (flags::DeclareFlags declare : t.declare) declare(group, &o, &raw);
    out << "\n" << group;
  }
  return out.str();
}

namespace {

// The listeners and their TLS.
absl::Status ValidateListeners(const ProxyOptions& o) {
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
  return absl::OkStatus();
}

// Who clients may be: client certificates and front proxies need the front-proxy pair.
absl::Status ValidateIdentity(const ProxyOptions& o) {
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
  return absl::OkStatus();
}

// Counts and rates: none negative, caches of one entry or more.
absl::Status ValidateCounts(const ProxyOptions& o) {
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

}  // namespace

absl::Status Validate(const ProxyOptions& o) {
  if (absl::Status s = ValidateListeners(o); !s.ok()) return s;
  if (absl::Status s = ValidateIdentity(o); !s.ok()) return s;
  return ValidateCounts(o);
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
