#include "proxy/server/health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace kf {

HealthChecks::HealthChecks() {
  Add("ping", {Endpoint::kHealthz, Endpoint::kLivez, Endpoint::kReadyz},
      [] { return absl::OkStatus(); });
  Add("shutdown", {Endpoint::kReadyz}, [this] {
    return shutting_down() ? absl::UnavailableError("process is shutting down") : absl::OkStatus();
  });
}

void HealthChecks::Add(std::string name, std::vector<Endpoint> endpoints, Check check) {
  checks_.push_back(Entry{std::move(name), std::move(endpoints), std::move(check)});
}

namespace {

struct Known {
  std::string_view prefix;
  HealthChecks::Endpoint endpoint;
};
constexpr Known kKnown[] = {{"/healthz", HealthChecks::Endpoint::kHealthz},
                            {"/livez", HealthChecks::Endpoint::kLivez},
                            {"/readyz", HealthChecks::Endpoint::kReadyz}};

// The endpoint `path` names and the rest of it ("" or a check's name); nullopt: none.
std::optional<std::pair<Known, absl::string_view>> Match(std::string_view path) {
  for (const Known& k : kKnown) {
    absl::string_view rest = ToAbsl(path);
    if (!absl::ConsumePrefix(&rest, ToAbsl(k.prefix))) continue;
    if (!rest.empty() && rest != "/" && rest.front() != '/') continue;
    absl::ConsumePrefix(&rest, "/");
    absl::ConsumeSuffix(&rest, "/");
    return std::pair{k, rest};
  }
  return std::nullopt;
}

}  // namespace

bool HealthChecks::Serves(std::string_view path) { return Match(path).has_value(); }

std::optional<HealthChecks::Response> HealthChecks::Handle(std::string_view path,
                                                           const Query& query) const {
  auto match = Match(path);
  if (!match) return std::nullopt;
  const auto& [known, rest] = *match;
  return Run(known.endpoint, known.prefix.substr(1), ToStd(rest), query.Has("verbose"), query);
}

HealthChecks::Response HealthChecks::Run(Endpoint endpoint, std::string_view endpoint_name,
                                         std::string_view only, bool verbose,
                                         const Query& query) const {
  // ?exclude=name skips a check, as the apiserver allows.
  std::vector<std::string_view> excluded;
  for (const auto& [k, v] : query.pairs()) {
    if (k == "exclude") excluded.push_back(v);
  }
  std::string listing;
  bool failed = false;
  bool found = only.empty();
  for (const Entry& e : checks_) {
    if (std::find(e.endpoints.begin(), e.endpoints.end(), endpoint) == e.endpoints.end()) continue;
    if (!only.empty() && e.name != only) continue;
    found = true;
    if (std::find(excluded.begin(), excluded.end(), e.name) != excluded.end()) {
      absl::StrAppend(&listing, "[+]", e.name, " excluded: ok\n");
      continue;
    }
    const absl::Status s = e.check();
    if (s.ok()) {
      absl::StrAppend(&listing, "[+]", e.name, " ok\n");
    } else {
      failed = true;
      absl::StrAppend(&listing, "[-]", e.name, " failed: reason withheld\n");
    }
  }
  if (!found) return Response{404, "404 page not found\n"};
  if (!only.empty()) {
    return failed ? Response{500, absl::StrCat("internal server error: ", ToAbsl(only),
                                               " check failed\n")}
                  : Response{200, "ok"};
  }
  if (failed) return Response{500, absl::StrCat(listing, ToAbsl(endpoint_name), " check failed\n")};
  if (verbose)
    return Response{200, absl::StrCat(listing, ToAbsl(endpoint_name), " check passed\n")};
  return Response{200, "ok"};
}

}  // namespace kf
