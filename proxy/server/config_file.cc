#include "proxy/server/config_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kf {
namespace po = boost::program_options;
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr const char* kApiVersion = "kube-fanout.io/v1alpha1";
constexpr const char* kKind = "KubeFanoutConfiguration";

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("--config ", path, ": ", what));
}

// The scalars of a value: one for a scalar, each item of a list of scalars.
absl::StatusOr<std::vector<std::string>> Scalars(const std::string& path, const std::string& key,
                                                 const YAML::Node& value) {
  std::vector<std::string> out;
  if (value.IsNull()) {
    out.emplace_back();
  } else if (value.IsScalar()) {
    out.push_back(value.Scalar());
  } else if (value.IsSequence()) {
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) return Bad(path, absl::StrCat("\"", key, "\": a list of scalars"));
      out.push_back(item.Scalar());
    }
  } else {
    return Bad(path, absl::StrCat("\"", key, "\": a scalar or a list, not a mapping"));
  }
  return out;
}

// Checks an optional apiVersion/kind key; true when `key` was one of them.
absl::StatusOr<bool> TypeKey(const std::string& path, const std::string& key,
                             const YAML::Node& value) {
  const char* want = key == "apiVersion" ? kApiVersion : key == "kind" ? kKind : nullptr;
  if (want == nullptr) return false;
  if (!value.IsScalar() || value.Scalar() != want) {
    return Bad(path, absl::StrCat(key, " must be ", want));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ConfigFileArgs(const std::string& path,
                                                        const std::string& text,
                                                        const po::options_description& flags,
                                                        const std::set<std::string>& skip) {
  if (text.size() > kMaxConfigBytes) return Bad(path, "larger than 1 MiB");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Bad(path, e.what());
  }
  if (root.IsNull()) return std::vector<std::string>{};
  if (!root.IsMap()) return Bad(path, "not a mapping of flag names to values");
  std::vector<std::string> args;
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>("");
    auto is_type = TypeKey(path, key, entry.second);
    if (!is_type.ok()) return is_type.status();
    if (*is_type) continue;
    const po::option_description* flag = flags.find_nothrow(key, /*approx=*/false);
    if (flag == nullptr || key == "config" || key == "help" || key == "version") {
      return Bad(path, absl::StrCat("unknown key \"", key, "\""));
    }
    auto values = Scalars(path, key, entry.second);
    if (!values.ok()) return values.status();
    if (skip.contains(key)) continue;           // The command line's value wins.
    if (flag->semantic()->max_tokens() == 0) {  // A switch: present when true.
      if (values->size() != 1 || ((*values)[0] != "true" && (*values)[0] != "false")) {
        return Bad(path, absl::StrCat("\"", key, "\": true or false"));
      }
      if ((*values)[0] == "true") args.push_back(absl::StrCat("--", key));
      continue;
    }
    if (!flag->semantic()->is_composing()) *values = {absl::StrJoin(*values, ",")};
    for (const std::string& v : *values) args.push_back(absl::StrCat("--", key, "=", v));
  }
  return args;
}

absl::StatusOr<std::vector<std::string>> ReadConfigFileArgs(const std::string& path,
                                                            const po::options_description& flags,
                                                            const std::set<std::string>& skip) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(path, "cannot read the file");
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return ConfigFileArgs(path, text, flags, skip);
}

}  // namespace kf
