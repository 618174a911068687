#include "proxy/serve/cacheable.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/continue_token.h"
#include "cache/selectable_fields.h"
#include "common/api/go_strconv.h"
#include "common/strings.h"
#include "proxy/edge/representation.h"

namespace kf {
namespace {

namespace http = boost::beast::http;

// The forms of each verb's query the cache answers; each refusal is one the apiserver words
// itself (its 400 or 422) or one the cache cannot serve exactly.
bool ListQueryCacheable(const Query& q) {
  const auto rvm = q.First("resourceVersionMatch");
  const auto rv = q.First("resourceVersion");
  if (q.Has("sendInitialEvents") || q.Has("watch")) return false;
  if (rvm && *rvm != "NotOlderThan" && *rvm != "Exact") return false;  // The apiserver's 422.
  if (rvm && (!rv || rv->empty())) return false;                       // 422 too.
  if (rvm && *rvm == "Exact" && *rv == "0") return false;              // 422 too.
  if (auto c = q.First("continue")) {
    // With an RV or a match rule: the apiserver's 400/422. A token it would not accept: 400.
    if (rvm || (rv && !rv->empty()) || !DecodeContinue(*c).ok()) return false;
  }
  return true;
}

bool WatchQueryCacheable(const Query& q) {
  const auto rvm = q.First("resourceVersionMatch");
  if (q.Has("continue")) return false;
  if (!q.Has("sendInitialEvents")) return !rvm;
  auto si = ParseGoBool(*q.First("sendInitialEvents"));
  if (!si || !*si || !rvm || *rvm != "NotOlderThan") return false;
  auto bm = q.First("allowWatchBookmarks");
  return bm && ParseGoBool(*bm) == true;
}

// Numbers the apiserver would refuse to parse: its error to give. Read as Go reads them
// (strconv): absl::SimpleAtoi would also take " 1", "1 " and "+1" for a resourceVersion, which
// the apiserver answers 400.
bool NumbersParse(const Query& q) {
  for (const char* k : {"timeoutSeconds", "limit"}) {
    if (auto v = q.First(k)) {
      const std::optional<int64_t> n = ParseGoInt(*v);
      if (!n || *n < 0) return false;
    }
  }
  if (auto v = q.First("allowWatchBookmarks"); v && !ParseGoBool(*v)) return false;
  if (auto rv = q.First("resourceVersion"); rv && !rv->empty() && !ParseGoUint(*rv)) return false;
  return true;
}

}  // namespace

bool Cacheable(const RequestInfo& info, const http::fields& headers) {
  // Conversions but PartialObjectMetadata (Table, meta.k8s.io/v1beta1) are the apiserver's.
  if (!info.subresource.empty() || ApiserverRendersAnswer(info, headers) ||
      NegotiateRepresentation(info, headers, /*has_protobuf=*/true).conversion ==
          Conversion::kApiserver) {
    return false;
  }
  const Query& q = info.query;
  if (info.verb == "list") return ListQueryCacheable(q) && NumbersParse(q);
  if (info.verb == "watch") return WatchQueryCacheable(q) && NumbersParse(q);
  if (info.verb == "get") {
    return !q.Has("continue") && !q.Has("resourceVersionMatch") && NumbersParse(q);
  }
  return false;
}

std::optional<WatchFilter> FilterFor(const RequestInfo& info, const ResourceType& type) {
  WatchFilter f;
  if (!type.namespaced && !info.namespace_.empty()) {
    // A namespaced path to a cluster-scoped kind is the apiserver's 404 to give; the one
    // exception is the namespaces resource itself, whose name RequestInfo reads as namespace.
    if (!(type.group.empty() && type.resource == "namespaces" && info.namespace_ == info.name)) {
      return std::nullopt;
    }
  } else {
    f.namespace_ = info.namespace_;
  }
  // What the handler filters by is the query's selectors, however the verb was found: a legacy
  // /watch/ path selects by them too (RequestInfo's copies are authorization's view).
  auto labels = LabelSelector::Parse(info.query.First("labelSelector").value_or(""));
  if (!labels.ok()) return std::nullopt;
  auto parsed = FieldSelector::Parse(info.query.First("fieldSelector").value_or(""));
  if (!parsed.ok()) return std::nullopt;
  if (info.verb == "watch" && !info.name.empty()) {
    // A watch of one object by path (/watch/namespaces/ns/pods/name): the apiserver selects it
    // by metadata.name, and a field selector naming another object is its 400 to give.
    if (type.namespaced && info.namespace_.empty()) return std::nullopt;
    if (parsed->Empty()) {
      parsed = FieldSelector::Parse(absl::StrCat("metadata.name=", EscapeFieldValue(info.name)));
      if (!parsed.ok()) return std::nullopt;
    } else if (parsed->RequiresExactMatch("metadata.name") != info.name) {
      return std::nullopt;
    }
  }
  // The fields this kind accepts, renamed as the apiserver renames them (spec.host → ...).
  auto fields = type.Fields().Convert(*parsed);
  if (!fields.ok()) return std::nullopt;
  f.labels = *std::move(labels);
  f.fields = *std::move(fields);
  f.name = f.fields.RequiresExactMatch("metadata.name");
  return f;
}

std::optional<WatchFilter> FilterFor(const RequestInfo& info, const Cacher& cacher) {
  std::optional<WatchFilter> f = FilterFor(info, cacher.type());
  const std::string_view asked = info.query.First("shardSelector").value_or("");
  if (!f || asked.empty() || (info.verb != "list" && info.verb != "watch")) return f;
  switch (cacher.upstream_sharding()) {
    case Cacher::UpstreamSharding::kIgnores:
      return f;
    case Cacher::UpstreamSharding::kUnknown:
      return std::nullopt;
    case Cacher::UpstreamSharding::kShards:
      break;
  }
  auto shard = ShardSelector::Parse(asked);
  if (!shard.ok()) return std::nullopt;
  f->shard = *std::move(shard);
  return f;
}

bool BusyWhileInitializing(const RequestInfo& info) {
  if (info.verb == "watch") return true;
  if (info.verb != "list" || info.query.Has("continue")) return false;
  const bool selects = !info.query.First("labelSelector").value_or("").empty() ||
                       !info.query.First("fieldSelector").value_or("").empty();
  int64_t limit = 0;
  if (auto v = info.query.First("limit"); !v || !absl::SimpleAtoi(ToAbsl(*v), &limit)) limit = 0;
  return selects || limit <= 0;
}

int RetryAfterWhileInitializing(std::chrono::steady_clock::duration initializing_for) {
  const double seconds = std::chrono::duration<double>(initializing_for).count();
  return static_cast<int>(std::clamp(std::exp(0.06 * seconds), 1.0, 30.0));
}

}  // namespace kf
