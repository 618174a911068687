#include "proxy/server/options.h"

#include <catch2/catch.hpp>
#include <vector>

namespace kf {
namespace {

absl::StatusOr<ProxyOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "kube-fanout");
  return ParseFlags(static_cast<int>(args.size()), args.data());
}

TEST_CASE("Flags parse in Kubernetes style, with --upstream repeatable") {
  auto o = Parse({"--listen=127.0.0.1:9000", "--upstream=https://a:6443", "--upstream",
                  "https://b:6443", "--shutdown-grace-period=1m30s", "--threads=3", "--v=4"});
  REQUIRE(o.ok());
  CHECK(o->listen == "127.0.0.1:9000");
  CHECK(o->upstreams == std::vector<std::string>{"https://a:6443", "https://b:6443"});
  CHECK(o->shutdown_grace_period == absl::Seconds(90));
  CHECK(o->threads == 3);
  CHECK(o->verbosity == 4);
}

TEST_CASE("The snapshot flags parse with their defaults and bounds") {
  auto d = Parse({});
  REQUIRE(d.ok());
  CHECK(d->cache_snapshot_dir.empty());
  CHECK(d->cache_snapshot_interval == absl::Seconds(10));
  CHECK(d->cache_snapshot_max_age == absl::Minutes(10));
  CHECK(d->cache_snapshot_max_bytes == 256u << 20);
  CHECK_FALSE(d->cache_snapshot_secrets);
  auto o = Parse({"--cache-snapshot-dir=/var/lib/kf", "--cache-snapshot-interval=30s",
                  "--cache-snapshot-max-age=1h", "--cache-snapshot-max-bytes=1000",
                  "--cache-snapshot-secrets=true"});
  REQUIRE(o.ok());
  CHECK(o->cache_snapshot_dir == "/var/lib/kf");
  CHECK(o->cache_snapshot_interval == absl::Seconds(30));
  CHECK(o->cache_snapshot_max_age == absl::Hours(1));
  CHECK(o->cache_snapshot_max_bytes == 1000);
  CHECK(o->cache_snapshot_secrets);
  CHECK_FALSE(Parse({"--cache-snapshot-interval=100ms"}).ok());
  const std::string help = HelpText();
  CHECK(help.find("--cache-snapshot-dir") > help.find("Cache flags:"));
  CHECK(help.find("--cache-snapshot-dir") < help.find("Admission and passthrough flags:"));
}

TEST_CASE("The watch bounds parse with their defaults, and negative counts are refused") {
  auto d = Parse({});
  REQUIRE(d.ok());
  CHECK(d->watcher_max_queue_bytes == 8u << 20);
  CHECK(d->watchers_max_total_queue_bytes == 1u << 30);
  CHECK(d->max_watchers == 100000);
  CHECK(d->max_watchers_per_user == 1000);
  auto o = Parse(
      {"--watchers-max-total-queue-bytes=1000", "--max-watchers=7", "--max-watchers-per-user=3"});
  REQUIRE(o.ok());
  CHECK(o->watchers_max_total_queue_bytes == 1000);
  CHECK(o->max_watchers == 7);
  CHECK(o->max_watchers_per_user == 3);
  CHECK(Validate(*o).ok());
  for (const char* bad : {"--max-watchers=-1", "--max-watchers-per-user=-1"}) {
    auto n = Parse({bad});
    REQUIRE(n.ok());
    CHECK(Validate(*n).code() == absl::StatusCode::kInvalidArgument);
  }
  const std::string help = HelpText();
  CHECK(help.find("--max-watchers") > help.find("Cache flags:"));
  CHECK(help.find("--max-watchers") < help.find("Admission and passthrough flags:"));
}

TEST_CASE("The consistent-read passthrough interval defaults to 1s and 0 turns it off") {
  auto d = Parse({});
  REQUIRE(d.ok());
  CHECK(d->consistent_read_passthrough_interval == absl::Seconds(1));
  auto off = Parse({"--consistent-read-passthrough-interval=0"});
  REQUIRE(off.ok());
  CHECK(off->consistent_read_passthrough_interval == absl::ZeroDuration());
  auto half = Parse({"--consistent-read-passthrough-interval=500ms"});
  REQUIRE(half.ok());
  CHECK(half->consistent_read_passthrough_interval == absl::Milliseconds(500));
  CHECK_FALSE(Parse({"--consistent-read-passthrough-interval=-1s"}).ok());
}

TEST_CASE("Consistent GETs pass through at up to 50 a second per resource unless told 0") {
  auto d = Parse({});
  REQUIRE(d.ok());
  CHECK(d->consistent_get_passthrough_qps == 50);
  auto off = Parse({"--consistent-get-passthrough-qps=0"});
  REQUIRE(off.ok());
  CHECK(off->consistent_get_passthrough_qps == 0);
}

TEST_CASE("The upstream watch idle timeout defaults to 2m and is at least 1s") {
  auto d = Parse({});
  REQUIRE(d.ok());
  CHECK(d->upstream_watch_idle_timeout == absl::Minutes(2));
  auto o = Parse({"--upstream-watch-idle-timeout=5s"});
  REQUIRE(o.ok());
  CHECK(o->upstream_watch_idle_timeout == absl::Seconds(5));
  CHECK_FALSE(Parse({"--upstream-watch-idle-timeout=500ms"}).ok());
  CHECK_FALSE(Parse({"--upstream-watch-idle-timeout=soon"}).ok());
}

TEST_CASE("Without any listener flag kube-fanout listens on 127.0.0.1:8001") {
  auto o = Parse({});
  REQUIRE(o.ok());
  CHECK(o->listen == "127.0.0.1:8001");
  CHECK(o->secure_listen.empty());
}

TEST_CASE("Unknown flags and bad values are errors with the flag named") {
  auto unknown = Parse({"--no-such-flag=1"});
  CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(unknown.status().message()).find("no-such-flag") != std::string::npos);
  auto bad = Parse({"--shutdown-grace-period=soon"});
  CHECK(std::string(bad.status().message()).find("shutdown-grace-period") != std::string::npos);
}

TEST_CASE("Validate insists on certificate and key for --secure-listen") {
  auto o = Parse({"--secure-listen=127.0.0.1:8443"});
  REQUIRE(o.ok());
  CHECK(Validate(*o).code() == absl::StatusCode::kInvalidArgument);
  o->tls_cert_file = "c.pem";
  o->tls_private_key_file = "k.pem";
  CHECK(Validate(*o).ok());
  o->listen = "nope";
  CHECK_FALSE(Validate(*o).ok());
}

TEST_CASE("A plain --listen off loopback is refused unless --allow-insecure-listen") {
  for (const char* ok : {"127.0.0.1:8001", "[::1]:8001", "127.0.0.2:8001"}) {
    const std::string flag = std::string("--listen=") + ok;
    INFO(flag);
    auto o = Parse({flag.c_str()});
    REQUIRE(o.ok());
    CHECK(Validate(*o).ok());
  }
  auto open = Parse({"--listen=0.0.0.0:8001", "--metrics-listen=0.0.0.0:8080"});
  REQUIRE(open.ok());
  const absl::Status refused = Validate(*open);
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(refused.message()).find("--allow-insecure-listen") != std::string::npos);
  CHECK_FALSE(Validate(*Parse({"--listen=:8001"})).ok());
  CHECK_FALSE(Validate(*Parse({"--listen=10.0.0.1:8001"})).ok());
  CHECK(Validate(*Parse({"--listen=0.0.0.0:8001", "--allow-insecure-listen"})).ok());
  CHECK(Validate(*Parse({"--metrics-listen=0.0.0.0:8080", "--listen=127.0.0.1:1"})).ok());
  CHECK_FALSE(Validate(*Parse({"--metrics-listen=nope"})).ok());
}

TEST_CASE("The help text groups the flags by topic, each flag once") {
  const std::string help = HelpText();
  size_t last = 0;
  for (const char* group :
       {"Listener flags:", "Client authentication and authorization flags:", "Upstream flags:",
        "Cache flags:", "Admission and passthrough flags:", "Process flags:"}) {
    INFO(group);
    const size_t at = help.find(group);
    REQUIRE(at != std::string::npos);
    CHECK(at > last);
    last = at;
  }
  CHECK(help.find("Other flags:") == std::string::npos);
  CHECK(help.find("--metrics-listen") < help.find("Upstream flags:"));
  CHECK(help.find("  --config PATH") > help.find("Process flags:"));
  CHECK(help.find("  --upstream URL") == help.rfind("  --upstream URL"));
}

TEST_CASE("HostPort accepts IPv4, bracketed IPv6 and an empty host") {
  CHECK(HostPort::Parse("127.0.0.1:80")->port == 80);
  CHECK(HostPort::Parse("[::1]:8443")->host == "::1");
  CHECK(HostPort::Parse(":8001")->host == "0.0.0.0");
  CHECK_FALSE(HostPort::Parse("localhost").ok());
  CHECK_FALSE(HostPort::Parse("a:99999").ok());
}

TEST_CASE("The help text lists every flag") {
  const std::string help = HelpText();
  for (const char* flag : {"--listen",
                           "--secure-listen",
                           "--tls-cert-file",
                           "--tls-private-key-file",
                           "--kubeconfig",
                           "--context",
                           "--upstream",
                           "--upstream-ca-file",
                           "--upstream-token-file",
                           "--upstream-insecure-skip-tls-verify",
                           "--upstream-dial-timeout",
                           "--upstream-watch-idle-timeout",
                           "--threads",
                           "--shutdown-grace-period",
                           "--v",
                           "--version",
                           "--help",
                           "--cache-resources",
                           "--watch-cache-window-bytes",
                           "--watcher-max-queue-bytes",
                           "--watchers-max-total-queue-bytes",
                           "--max-watchers",
                           "--max-watchers-per-user",
                           "--watch-bookmark-interval",
                           "--metrics-listen",
                           "--allow-insecure-listen",
                           "--config"}) {
    INFO(flag);
    CHECK(help.find(flag) != std::string::npos);
  }
}

TEST_CASE("Upstream flags win over the kubeconfig's server, keeping its trust settings") {
  auto o = Parse({"--upstream=https://10.0.0.1:6443", "--upstream-token-file=/tmp/t"});
  REQUIRE(o.ok());
  auto cfg = ResolveUpstream(*o);
  REQUIRE(cfg.ok());
  REQUIRE(cfg->endpoints.size() == 1);
  CHECK(cfg->endpoints[0].host == "10.0.0.1");
  CHECK(cfg->token_file == "/tmp/t");
}

}  // namespace
}  // namespace kf

namespace kf {
namespace {

TEST_CASE("An empty cache-resources flag turns the cache off and a list replaces the default") {
  auto none = Parse({"--cache-resources="});
  REQUIRE(none.ok());
  CHECK(none->cache_resources_set);
  CHECK(none->cache_resources.empty());
  auto some = Parse({"--cache-resources=pods, endpointslices.discovery.k8s.io/v1"});
  REQUIRE(some.ok());
  CHECK(some->cache_resources ==
        std::vector<std::string>{"pods", "endpointslices.discovery.k8s.io/v1"});
  auto unset = Parse({});
  REQUIRE(unset.ok());
  CHECK_FALSE(unset->cache_resources_set);
}

TEST_CASE("The list pool's threads and shared gzip bytes are flags, at the end of the cache's") {
  auto defaults = Parse({});
  REQUIRE(defaults.ok());
  CHECK(defaults->list_threads == 1);
  CHECK(defaults->list_gzip_cache_bytes == 64u << 20);
  auto set = Parse({"--list-threads=0", "--list-gzip-cache-bytes=0"});
  REQUIRE(set.ok());
  CHECK(set->list_threads == 0);
  CHECK(set->list_gzip_cache_bytes == 0);
  CHECK(Validate(*set).ok());
  auto negative = Parse({"--list-threads=-1"});
  REQUIRE(negative.ok());
  CHECK(Validate(*negative).code() == absl::StatusCode::kInvalidArgument);
  const std::string help = HelpText();
  CHECK(help.find("--list-threads") > help.find("Cache flags:"));
  CHECK(help.find("--list-gzip-cache-bytes") < help.find("Admission and passthrough flags:"));
}

}  // namespace
}  // namespace kf
