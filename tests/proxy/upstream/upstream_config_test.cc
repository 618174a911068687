#include "proxy/upstream/upstream_config.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kf {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/kf-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
  }
  fs::path path;
};

TEST_CASE("UpstreamEndpoint parses URLs with ports, IPv6 and a path prefix") {
  auto a = UpstreamEndpoint::Parse("https://127.0.0.1:6443");
  REQUIRE(a.ok());
  CHECK(a->tls);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 6443);
  CHECK(a->HostHeader() == "127.0.0.1:6443");

  auto b = UpstreamEndpoint::Parse("http://[::1]/prefix/");
  REQUIRE(b.ok());
  CHECK_FALSE(b->tls);
  CHECK(b->host == "::1");
  CHECK(b->port == 80);
  CHECK(b->base_path == "/prefix");
  CHECK(b->HostHeader() == "[::1]");
  CHECK(b->Url() == "http://[::1]/prefix");

  CHECK_FALSE(UpstreamEndpoint::Parse("ftp://x").ok());
  CHECK_FALSE(UpstreamEndpoint::Parse("https://:6443").ok());
  CHECK_FALSE(UpstreamEndpoint::Parse("https://h:0").ok());
}

TEST_CASE("A kubeconfig yields its context's server, CA and user credentials") {
  TempDir dir;
  dir.Write("ca.crt", "CA-PEM");
  dir.Write("kubeconfig", R"(apiVersion: v1
kind: Config
current-context: admin
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
- name: other
  cluster:
    server: https://10.1.1.1:443
    certificate-authority-data: T1RIRVItQ0E=
users:
- name: admin
  user:
    token: s3cret
- name: certs
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
contexts:
- name: admin
  context: {cluster: local, user: admin}
- name: second
  context: {cluster: other, user: certs}
)");
  auto cfg = LoadKubeconfig((dir.path / "kubeconfig").string(), "");
  REQUIRE(cfg.ok());
  REQUIRE(cfg->endpoints.size() == 1);
  CHECK(cfg->endpoints[0].port == 6443);
  CHECK(cfg->ca_pem == "CA-PEM");  // Relative path resolved next to the kubeconfig.
  CHECK(cfg->token == "s3cret");

  auto second = LoadKubeconfig((dir.path / "kubeconfig").string(), "second");
  REQUIRE(second.ok());
  CHECK(second->ca_pem == "OTHER-CA");
  CHECK(second->client_cert_pem == "CERT");
  CHECK(second->client_key_pem == "KEY");

  CHECK(LoadKubeconfig((dir.path / "kubeconfig").string(), "missing").status().code() ==
        absl::StatusCode::kNotFound);
  CHECK(LoadKubeconfig((dir.path / "absent").string(), "").status().code() ==
        absl::StatusCode::kNotFound);
  dir.Write("broken", "clusters: [unclosed");
  CHECK(LoadKubeconfig((dir.path / "broken").string(), "").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("In-cluster configuration comes from the service env and the ServiceAccount mount") {
  TempDir dir;
  dir.Write("token", "sa-token");
  dir.Write("ca.crt", "SA-CA");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  CHECK(absl::IsNotFound(InClusterConfig(dir.path.string()).status()));
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = InClusterConfig(dir.path.string());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  REQUIRE(cfg.ok());
  CHECK(cfg->endpoints[0].Url() == "https://10.96.0.1");
  CHECK(cfg->ca_pem == "SA-CA");
  CHECK(cfg->token_file == (dir.path / "token").string());
}

}  // namespace
}  // namespace kf
