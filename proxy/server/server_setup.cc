// What Server::Start checks and builds before anything is served: the upstream TLS contexts, the
// events upstream, the cache and its snapshots, admission, and what each worker is given.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "proxy/server/server.h"
#include "proxy/upstream/node_shape.h"

namespace kf {

absl::Status Server::MakeUpstreamTls() {
  auto passthrough = MakePassthroughTlsContext(upstream_);
  if (!passthrough.ok()) return passthrough.status();
  passthrough_tls_ = *std::move(passthrough);
  auto own = MakeOwnTlsContext(upstream_);
  if (!own.ok()) return own.status();
  own_tls_ = *std::move(own);
  own_credentials_ = std::make_unique<OwnCredentials>(upstream_);
  if (!options_.proxy_client_cert_file.empty()) {
    UpstreamConfig front = upstream_;
    auto cert = ReadFile(options_.proxy_client_cert_file);
    if (!cert.ok()) return cert.status();
    auto key = ReadFile(options_.proxy_client_key_file);
    if (!key.ok()) return key.status();
    front.client_cert_pem = *std::move(cert);
    front.client_key_pem = *std::move(key);
    auto tls = MakeOwnTlsContext(front);
    if (!tls.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--proxy-client-cert-file: ", tls.status().message()));
    }
    front_proxy_tls_ = *std::move(tls);
  }
  const auto set = [](std::vector<std::string>& to, const std::vector<std::string>& flag) {
    if (!flag.empty()) to = flag;
  };
  set(request_header_.username, options_.requestheader_username_headers);
  set(request_header_.group, options_.requestheader_group_headers);
  set(request_header_.uid, options_.requestheader_uid_headers);
  set(request_header_.extra_prefix, options_.requestheader_extra_headers_prefix);
  return absl::OkStatus();
}

absl::Status Server::MakeEventsUpstream() {
  if (!options_.events_upstreams.empty()) {
    UpstreamConfig events = upstream_;
    events.endpoints.clear();
    for (const std::string& url : options_.events_upstreams) {
      auto ep = UpstreamEndpoint::Parse(url);
      if (!ep.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--events-upstream ", url, ": ", ep.status().message()));
      }
      events.endpoints.push_back(*std::move(ep));
    }
    events.source = "--events-upstream";
    events_upstream_ = std::move(events);
  }
  return absl::OkStatus();
}

absl::Status Server::MakeCache() {
  absl::StatusOr<std::vector<ResourceSpec>> specs = ResourceSpec::ParseList(
      options_.cache_resources_set ? options_.cache_resources : DefaultCachedResources());
  if (!specs.ok()) return specs.status();
  absl::StatusOr<std::vector<ResourceSpec>> proto_at_start = ResourceSpec::ParseList(
      absl::StrSplit(options_.protobuf_cache_resources, ',', absl::SkipWhitespace()));
  if (!proto_at_start.ok()) return proto_at_start.status();
  if (!specs->empty()) {
    const EventRingLimits limits{.max_bytes = options_.watch_cache_window_bytes};
    cache_ = std::make_unique<CachedResources>(*std::move(specs), limits, log_);
    cache_->SetWatchIdleTimeout(
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.upstream_watch_idle_timeout)));
    cache_->SetProtobufAtStart(*std::move(proto_at_start));
    cache_->SetSelfCheckInterval(
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.cache_check_interval)));
    if (!options_.cache_snapshot_dir.empty()) UseSnapshots();
    health_.Add("cache-sync", {HealthChecks::Endpoint::kReadyz}, [this] {
      return cache_->AllSynced() ? absl::OkStatus() : absl::UnavailableError("caches not synced");
    });
  }
  return absl::OkStatus();
}

void Server::UseSnapshots() {
  SnapshotOptions snap;
  snap.dir = options_.cache_snapshot_dir;
  snap.max_bytes = options_.cache_snapshot_max_bytes;
  snap.interval = std::chrono::seconds(absl::ToInt64Seconds(options_.cache_snapshot_interval));
  snap.max_age = std::chrono::seconds(absl::ToInt64Seconds(options_.cache_snapshot_max_age));
  snap.include_secrets = options_.cache_snapshot_secrets;
  // A snapshot belongs to the upstream it was taken from (its endpoints, in order).
  const auto identity = [](const UpstreamConfig& c) {
    std::string id;
    for (const UpstreamEndpoint& ep : c.endpoints)
      absl::StrAppend(&id, id.empty() ? "" : ",", ep.Url());
    return id;
  };
  cache_->UseSnapshots(std::make_unique<SnapshotStore>(std::move(snap), log_), identity(upstream_),
                       identity(events_upstream_ ? *events_upstream_ : upstream_));
}

absl::Status Server::MakeAdmission() {
  if (options_.enable_admission) {
    ratelimit::Config config = ratelimit::DefaultConfig();
    if (!options_.admission_config.empty()) {
      std::ifstream in(options_.admission_config);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) {
        return absl::InvalidArgumentError(
            absl::StrCat("--admission-config ", options_.admission_config, ": cannot read"));
      }
      auto parsed = ratelimit::ParseConfig(text.str());
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--admission-config ", options_.admission_config, ": ", parsed.status().message()));
      }
      config = *std::move(parsed);
      admission_config_text_ = text.str();
    }
    admission_ = std::make_unique<ratelimit::Admission>(std::move(config));
  }
  return absl::OkStatus();
}

WorkerUpstream Server::WorkerUpstreamFor(unsigned threads) {
  const auto seconds = [](absl::Duration d) {
    return std::chrono::seconds(absl::ToInt64Seconds(d));
  };
  WorkerUpstream up;
  up.upstream = &upstream_;
  up.events = events_upstream_ ? &*events_upstream_ : nullptr;
  up.passthrough_tls = passthrough_tls_.get();
  up.own_tls = own_tls_.get();
  up.front_proxy_tls = front_proxy_tls_.get();
  up.dial_timeout =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.upstream_dial_timeout));
  up.own_authorization = [creds = own_credentials_.get()] { return creds->Header(); };
  // The review budget is the process's, shared out among the session threads.
  const double review_qps = options_.authentication_token_review_qps / threads;
  up.authentication = {seconds(options_.authentication_cache_ttl),
                       seconds(options_.authentication_cache_unauthorized_ttl),
                       static_cast<size_t>(options_.authentication_cache_max_entries), review_qps,
                       std::max(1.0, 2 * review_qps)};
  up.authorization = {seconds(options_.authorization_cache_authorized_ttl),
                      seconds(options_.authorization_cache_unauthorized_ttl),
                      static_cast<size_t>(options_.authorization_cache_max_entries)};
  up.authentication_stats = &authentication_stats_;
  up.authorization_stats = &authorization_stats_;
  access_answers_ = std::make_unique<AccessAnswers>(
      static_cast<size_t>(options_.authorization_cache_max_entries),
      options_.authorization_share_node_reviews ? NewProbeNodeName() : std::string());
  up.access_answers = access_answers_.get();
  up.pool_stats = &upstream_pool_stats_;
  up.passthrough_http2 = options_.upstream_http2;
  up.request_header = &request_header_;
  return up;
}

}  // namespace kf
