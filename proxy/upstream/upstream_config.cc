#include "proxy/upstream/upstream_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace kf {
namespace {

std::string Str(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

YAML::Node FindNamed(const YAML::Node& list, const std::string& name, const char* inner) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const YAML::Node& item : list) {
    if (Str(item, "name") == name) return item[inner];
  }
  return YAML::Node();
}

std::string Resolve(const std::filesystem::path& dir, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (dir / p).string();
}

// A PEM from either KEY-data (base64) or KEY (a file path).
absl::StatusOr<std::string> PemFrom(const YAML::Node& n, const char* data_key, const char* file_key,
                                    const std::filesystem::path& dir) {
  if (std::string data = Str(n, data_key); !data.empty()) {
    std::string pem;
    if (!absl::Base64Unescape(data, &pem)) {
      return absl::InvalidArgumentError(absl::StrCat(data_key, " is not valid base64"));
    }
    return pem;
  }
  if (std::string file = Str(n, file_key); !file.empty()) return ReadFile(Resolve(dir, file));
  return std::string();
}

absl::StatusOr<UpstreamConfig> FromKubeconfigNode(const YAML::Node& root, const std::string& path,
                                                  const std::string& context_flag) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::string context_name =
      context_flag.empty() ? Str(root, "current-context") : context_flag;
  if (context_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, " has no current-context; pass --context"));
  }
  const YAML::Node context = FindNamed(root["contexts"], context_name, "context");
  if (!context.IsMap()) {
    return absl::NotFoundError(absl::StrCat("context \"", context_name, "\" not found in ", path));
  }
  const std::string cluster_name = Str(context, "cluster");
  const YAML::Node cluster = FindNamed(root["clusters"], cluster_name, "cluster");
  if (!cluster.IsMap()) {
    return absl::NotFoundError(absl::StrCat("cluster \"", cluster_name, "\" not found in ", path));
  }
  UpstreamConfig cfg;
  cfg.source = absl::StrCat("kubeconfig ", path, " context ", context_name);
  auto endpoint = UpstreamEndpoint::Parse(Str(cluster, "server"));
  if (!endpoint.ok()) return endpoint.status();
  cfg.endpoints.push_back(*std::move(endpoint));
  auto ca = PemFrom(cluster, "certificate-authority-data", "certificate-authority", dir);
  if (!ca.ok()) return ca.status();
  cfg.ca_pem = *std::move(ca);
  cfg.insecure_skip_tls_verify =
      cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>(false);
  cfg.tls_server_name = Str(cluster, "tls-server-name");

  const YAML::Node user = FindNamed(root["users"], Str(context, "user"), "user");
  if (user.IsMap()) {
    cfg.token = Str(user, "token");
    cfg.token_file = Resolve(dir, Str(user, "tokenFile"));
    auto cert = PemFrom(user, "client-certificate-data", "client-certificate", dir);
    if (!cert.ok()) return cert.status();
    auto key = PemFrom(user, "client-key-data", "client-key", dir);
    if (!key.ok()) return key.status();
    cfg.client_cert_pem = *std::move(cert);
    cfg.client_key_pem = *std::move(key);
  }
  return cfg;
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<UpstreamEndpoint> UpstreamEndpoint::Parse(std::string_view url) {
  UpstreamEndpoint ep;
  absl::string_view rest = ToAbsl(url);
  if (absl::ConsumePrefix(&rest, "https://")) {
    ep.tls = true;
    ep.port = 443;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    ep.tls = false;
    ep.port = 80;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("upstream URL \"", ToAbsl(url), "\" must start with https:// or http://"));
  }
  absl::string_view authority = rest.substr(0, rest.find('/'));
  absl::string_view path = authority.size() < rest.size() ? rest.substr(authority.size()) : "";
  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad IPv6 host in \"", ToAbsl(url), "\""));
    }
    ep.host = std::string(authority.substr(0, close));
    absl::string_view after = authority.substr(close + 1);
    if (absl::ConsumePrefix(&after, ":")) port_text = after;
  } else if (size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    ep.host = std::string(authority.substr(0, colon));
    port_text = authority.substr(colon + 1);
  } else {
    ep.host = std::string(authority);
  }
  if (ep.host.empty())
    return absl::InvalidArgumentError(absl::StrCat("no host in \"", ToAbsl(url), "\""));
  if (!port_text.empty()) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port in \"", ToAbsl(url), "\""));
    }
    ep.port = static_cast<uint16_t>(port);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  ep.base_path = std::string(path);
  return ep;
}

std::string UpstreamEndpoint::HostHeader() const {
  const std::string h = host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host;
  const bool default_port = (tls && port == 443) || (!tls && port == 80);
  return default_port ? h : absl::StrCat(h, ":", port);
}

std::string UpstreamEndpoint::Url() const {
  return absl::StrCat(tls ? "https://" : "http://", HostHeader(), base_path);
}

absl::StatusOr<UpstreamConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  // yaml-cpp reports errors by exception; they stop here and become a Status.
  try {
    const YAML::Node root = YAML::LoadFile(path);
    return FromKubeconfigNode(root, path, context);
  } catch (const YAML::BadFile&) {
    return absl::NotFoundError(absl::StrCat("cannot read kubeconfig ", path));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": ", e.what()));
  }
}

absl::StatusOr<UpstreamConfig> InClusterConfig(std::string_view sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  const std::string token_file = absl::StrCat(ToAbsl(sa_dir), "/token");
  if (host == nullptr || port == nullptr || !std::filesystem::exists(token_file)) {
    return absl::NotFoundError(
        "not running in a cluster (no KUBERNETES_SERVICE_HOST/PORT or "
        "ServiceAccount token)");
  }
  const std::string h(host);
  auto endpoint = UpstreamEndpoint::Parse(absl::StrCat(
      "https://", h.find(':') != std::string::npos ? absl::StrCat("[", h, "]") : h, ":", port));
  if (!endpoint.ok()) return endpoint.status();
  UpstreamConfig cfg;
  cfg.source = "in-cluster";
  cfg.endpoints.push_back(*std::move(endpoint));
  auto ca = ReadFile(absl::StrCat(ToAbsl(sa_dir), "/ca.crt"));
  if (!ca.ok()) return ca.status();
  cfg.ca_pem = *std::move(ca);
  cfg.token_file = token_file;
  return cfg;
}

}  // namespace kf
