#include "proxy/sync/self_check.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/listed_versions.h"
#include "common/api/upstream_list.h"
#include "common/strings.h"
#include "common/use_nothrow.h"

namespace kf {
namespace {

constexpr size_t kPageObjects = 500;
// Keys named in the log line of an inconsistency (the count says how many differ in all).
constexpr size_t kLoggedDifferences = 10;

std::string DescribeDifferences(const std::vector<VersionDifference>& diffs) {
  std::string out;
  for (const VersionDifference& d : diffs) {
    absl::StrAppend(
        &out, out.empty() ? "" : "; ", d.key,
        " cache=", d.cached == 0 ? std::string("absent") : absl::StrCat(d.cached),
        " upstream=", d.upstream == 0 ? std::string("absent") : absl::StrCat(d.upstream));
  }
  return out;
}

}  // namespace

SelfCheck::SelfCheck(const asio::any_io_executor& executor, std::chrono::milliseconds interval,
                     std::function<std::vector<Reflector*>()> caches)
    : timer_(executor), interval_(interval), caches_(std::move(caches)) {}

void SelfCheck::Stop() {
  stopped_ = true;
  timer_.cancel();
}

asio::awaitable<void> SelfCheck::Run() {
  while (!stopped_) {
    const std::vector<Reflector*> caches = caches_();
    // Each cache once per interval, the checks spread evenly over it, one at a time.
    const auto spacing = interval_ / std::max<size_t>(caches.size(), 1);
    for (size_t i = 0; i < std::max<size_t>(caches.size(), 1) && !stopped_; ++i) {
      timer_.expires_after(spacing);
      co_await timer_.async_wait(use_nothrow);
      if (!stopped_ && i < caches.size()) co_await caches[i]->CheckConsistency();
    }
  }
}

std::string Reflector::ExactListTarget(uint64_t rv, std::string_view cont) const {
  // The first page names the RV; the rest follow its continue token (the same snapshot).
  return cont.empty()
             ? absl::StrCat(CollectionPath(), "?limit=", kPageObjects, "&resourceVersion=", rv,
                            "&resourceVersionMatch=Exact")
             : absl::StrCat(CollectionPath(), "?limit=", kPageObjects, "&continue=", ToAbsl(cont));
}

asio::awaitable<absl::StatusOr<std::vector<Cacher::Listed>>> Reflector::ListVersionsAt(
    uint64_t rv, int* status) {
  std::vector<Cacher::Listed> out;
  std::string cont;
  do {
    const std::string target = ExactListTarget(rv, cont);
    auto res = co_await UpstreamCall(pool_, http::verb::get, target, credentials_(), "",
                                     std::chrono::seconds(60), kMetadataListAccept);
    if (!res.ok()) co_return res.status();
    *status = res->status;
    if (res->status != 200) {
      co_return absl::UnavailableError(
          absl::StrCat("LIST ", target, ": HTTP ", res->status, ": ", res->body.substr(0, 300)));
    }
    auto page = ParseListPage(res->body);
    if (!page.ok()) co_return page.status();
    if (page->resource_version != rv) {
      co_return absl::DataLossError(
          absl::StrCat("LIST ", target, ": answered at ", page->resource_version));
    }
    auto listed = ListedVersions(*page);
    if (!listed.ok()) co_return listed.status();
    for (Cacher::Listed& l : *listed) out.push_back(std::move(l));
    cont = page->continue_token;
  } while (!cont.empty());
  co_return out;
}

asio::awaitable<CheckResult> Reflector::CheckConsistency() {
  const std::optional<Cacher::Digest> mine = cacher_.VersionsDigest();
  if (stopped_ || !mine || mine->resource_version == 0) co_return CheckResult::kSkipped;
  const uint64_t rv = mine->resource_version;
  const std::string resource = cacher_.type().GroupResource();
  int status = 0;
  auto theirs = co_await ListVersionsAt(rv, &status);
  if (!theirs.ok()) {
    // 410: the upstream's history (its watch cache's snapshots, etcd's compaction) no longer
    // reaches this RV. Not a verdict: the next round checks at a newer one.
    const bool expired = status == 410;
    ++(expired ? stats_.checks_expired : stats_.checks_failed);
    log_.Log(expired ? Logger::Level::kInfo : Logger::Level::kWarning,
             expired ? "cache self-check skipped: the upstream no longer lists this resourceVersion"
                     : "cache self-check failed",
             {{"resource", resource},
              {"resourceVersion", static_cast<int64_t>(rv)},
              {"error", ToStd(theirs.status().message())}});
    co_return expired ? CheckResult::kExpired : CheckResult::kFailed;
  }
  VersionDigest upstream;
  for (const Cacher::Listed& l : *theirs) upstream.Add(l.key, l.resource_version);
  if (upstream == mine->versions) {
    ++stats_.checks_consistent;
    co_return CheckResult::kConsistent;
  }
  ++stats_.checks_inconsistent;
  // Which keys: the cache's state at `rv` again (it may have moved on meanwhile).
  auto cached = cacher_.VersionsAt(rv);
  size_t total = 0;
  const std::vector<VersionDifference> diffs =
      cached.ok() ? DiffVersions(*std::move(cached), *std::move(theirs), kLoggedDifferences, &total)
                  : std::vector<VersionDifference>{};
  log_.Error("cache inconsistent with the upstream, relisting",
             {{"resource", resource},
              {"resourceVersion", static_cast<int64_t>(rv)},
              {"cachedObjects", static_cast<int64_t>(mine->versions.count())},
              {"upstreamObjects", static_cast<int64_t>(upstream.count())},
              {"differences", static_cast<int64_t>(total)},
              {"keys", DescribeDifferences(diffs)}});
  Relist();
  co_return CheckResult::kInconsistent;
}

void Reflector::Relist() {
  relist_requested_ = true;
  if (active_ != nullptr) active_->Cancel();
}

}  // namespace kf
