#include "proxy/server/config_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

#include "proxy/server/options.h"

namespace kf {
namespace {

namespace po = boost::program_options;

po::options_description Flags() {
  po::options_description d;
  d.add_options()("secure-listen", po::value<std::string>())(
      "upstream", po::value<std::vector<std::string>>()->composing())(
      "cache-resources", po::value<std::string>())("skip-verify", po::bool_switch())(
      "config", po::value<std::string>());
  return d;
}

absl::StatusOr<std::vector<std::string>> Args(const std::string& text,
                                              std::set<std::string> skip = {}) {
  return ConfigFileArgs("f.yaml", text, Flags(), skip);
}

TEST_CASE(
    "A config file's keys become flags, lists repeating or joined, switches present when true") {
  auto args = Args(
      "apiVersion: kube-fanout.io/v1alpha1\nkind: KubeFanoutConfiguration\n"
      "secure-listen: 0.0.0.0:6443\nupstream: [https://a:6443, https://b:6443]\n"
      "cache-resources: [pods, nodes]\nskip-verify: true\n");
  REQUIRE(args.ok());
  CHECK(*args == std::vector<std::string>{"--secure-listen=0.0.0.0:6443",
                                          "--upstream=https://a:6443", "--upstream=https://b:6443",
                                          "--cache-resources=pods,nodes", "--skip-verify"});
  CHECK(Args("skip-verify: false\n")->empty());
  CHECK(Args("")->empty());
}

TEST_CASE("A config file's keys given on the command line are left out") {
  auto args = Args("secure-listen: 0.0.0.0:6443\nupstream: https://a:6443\n", {"upstream"});
  REQUIRE(args.ok());
  CHECK(*args == std::vector<std::string>{"--secure-listen=0.0.0.0:6443"});
}

TEST_CASE("Unknown keys, nested values, a wrong kind and bad YAML are errors naming the file") {
  for (const char* text :
       {"no-such-flag: 1\n", "config: other.yaml\n", "upstream: {a: b}\n", "kind: Pod\n",
        "secure-listen: [\n", "- a\n- b\n", "skip-verify: maybe\n"}) {
    INFO(text);
    auto args = Args(text);
    CHECK(args.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(args.status().message()).find("f.yaml") != std::string::npos);
  }
  CHECK(std::string(Args("no-such-flag: 1\n").status().message()).find("no-such-flag") !=
        std::string::npos);
}

TEST_CASE("ParseFlags reads --config, and the command line wins over the file") {
  char path[] = "/tmp/kf-config-test-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << "threads: 3\nlisten: 127.0.0.1:9000\nupstream: [https://a:6443]\n"
                         "upstream-insecure-skip-tls-verify: true\nv: 2\n";
  std::vector<std::string> flag = {"kube-fanout", std::string("--config=") + path,
                                   "--upstream=https://b:6443", "--v=5"};
  std::vector<const char*> argv;
  for (const auto& a : flag) argv.push_back(a.c_str());
  auto o = ParseFlags(static_cast<int>(argv.size()), argv.data());
  std::remove(path);
  REQUIRE(o.ok());
  CHECK(o->threads == 3);
  CHECK(o->listen == "127.0.0.1:9000");
  CHECK(o->upstreams == std::vector<std::string>{"https://b:6443"});
  CHECK(o->upstream_insecure_skip_tls_verify);
  CHECK(o->verbosity == 5);
  const char* missing[] = {"kube-fanout", "--config=/nonexistent/kube-fanout.yaml"};
  CHECK(ParseFlags(2, missing).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kf
