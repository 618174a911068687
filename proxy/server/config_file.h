// ConfigFileArgs: kube-fanout's flags read from a YAML file (--config FILE), in the spirit of
// the Kubernetes components' config files: a mapping whose keys are the flags' names, e.g.
//
//   apiVersion: kube-fanout.io/v1alpha1     # optional; if present, exactly this
//   kind: KubeFanoutConfiguration           # optional; if present, exactly this
//   secure-listen: 0.0.0.0:6443
//   upstream: [https://10.0.0.1:6443, https://10.0.0.2:6443]   # repeatable flag: a list
//   cache-resources: [pods, nodes]          # other flags: a list is joined with commas
//   upstream-insecure-skip-tls-verify: false
//
// The file becomes "--name=value" arguments that ParseFlags reads like the command line's;
// flags given on the command line win over the file. Unknown keys are an error, as are
// config, help and version, nested mappings, and files over 1 MiB. Stateless functions.
#ifndef KUBE_FANOUT_SERVER_CONFIG_FILE_H_
#define KUBE_FANOUT_SERVER_CONFIG_FILE_H_

#include <boost/program_options/options_description.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kf {

// The arguments `text` (the file's content) stands for, leaving out the keys in `skip` (those
// given on the command line). `path` only names the file in errors.
absl::StatusOr<std::vector<std::string>> ConfigFileArgs(
    const std::string& path, const std::string& text,
    const boost::program_options::options_description& flags, const std::set<std::string>& skip);

// As above, reading the file first.
absl::StatusOr<std::vector<std::string>> ReadConfigFileArgs(
    const std::string& path, const boost::program_options::options_description& flags,
    const std::set<std::string>& skip);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_CONFIG_FILE_H_
