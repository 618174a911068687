#include "serve/list_response.h"

#include <array>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/continue_token.h"
#include "common/strings.h"
#include "edge/gzip.h"

namespace kf {
namespace {

namespace http = beast::http;

// The head the apiserver's handlers write for a JSON object or list.
ResponseHead JsonHead(int status, size_t length) {
  ResponseHead head;
  head.status = status;
  head.fields.set(http::field::cache_control, "no-cache, private");
  head.fields.set(http::field::content_type, "application/json");
  head.framing = ResponseHead::Framing::kWhole;
  head.length = length;
  return head;
}

// Compressed as the apiserver's SerializeObject compresses (edge/gzip.h).
asio::awaitable<void> WriteJson(Exchange& x, int status, std::span<const asio::const_buffer> body,
                                CacheServeStats& stats) {
  size_t length = asio::buffer_size(body);
  if (length > kGzipThresholdBytes && AcceptsGzip(x.request.headers)) {
    const std::string gzipped = Gzip(body);
    length = gzipped.size();
    ResponseHead head = JsonHead(status, length);
    head.fields.set(http::field::content_encoding, "gzip");
    head.fields.insert(http::field::vary, "Accept-Encoding");
    const std::array<asio::const_buffer, 1> piece{asio::buffer(gzipped)};
    const beast::error_code ec = co_await WriteAnswer(*x.response, std::move(head), piece);
    if (ec) x.error = ec.message();
    stats.bytes_written += length;
    co_return;
  }
  const beast::error_code ec = co_await WriteAnswer(*x.response, JsonHead(status, length), body);
  if (ec) x.error = ec.message();
  stats.bytes_written += length;
}

// The list's metadata: its RV and, for a page with more after it, the continue token (the key
// after the last item, relative to the listed prefix, as continue.go encodes it).
std::string ListMeta(const Cacher::Page& list, const WatchFilter& filter, const ResourceType& t,
                     int64_t limit) {
  std::string meta = absl::StrCat("{\"resourceVersion\":\"", list.resource_version, "\"");
  if (list.has_more && !list.items.empty()) {
    const CachedObject& last = *list.items.back();
    const bool in_namespace = t.namespaced && !filter.namespace_.empty();
    const std::string start =
        absl::StrCat(in_namespace ? last.name() : last.key(), std::string(1, '\0'));
    absl::StrAppend(&meta, ",\"continue\":\"",
                    EncodeContinue(start, static_cast<int64_t>(list.resource_version)), "\"");
    if (filter.labels.Empty() && filter.fields.Empty()) {
      absl::StrAppend(&meta, ",\"remainingItemCount\":", list.candidates - limit);
    }
  }
  return meta + "}";
}

}  // namespace

ListPlan PlanList(const RequestInfo& info, const WatchFilter& filter, const ResourceType& type) {
  const Query& q = info.query;
  ListPlan plan;
  if (auto v = q.First("resourceVersion")) plan.rv = std::string(*v);
  const auto rvm = q.First("resourceVersionMatch");
  int64_t limit = 0;
  if (auto v = q.First("limit")) (void)absl::SimpleAtoi(ToAbsl(*v), &limit);
  if (plan.rv && *plan.rv == "0") limit = 0;  // As the apiserver: RV=0 lists ignore the limit.
  plan.page.limit = limit;
  const std::string prefix = type.namespaced && !filter.namespace_.empty()
                                 ? absl::StrCat(filter.namespace_, "/")
                                 : std::string();
  if (auto c = q.First("continue")) {
    const ContinueToken token = *DecodeContinue(*c);  // Checked by Cacheable.
    plan.page.start_key = absl::StrCat(prefix, token.start);
    if (token.resource_version > 0) {
      plan.rv = absl::StrCat(token.resource_version);
      plan.exact = true;
    } else {
      plan.rv.reset();  // "Continue at the latest": a consistent read from the start key.
    }
    return plan;
  }
  const bool rv_n = plan.rv && !plan.rv->empty() && *plan.rv != "0";
  if ((rvm && *rvm == "Exact") || (!rvm && limit > 0 && rv_n)) {
    plan.exact = true;  // Exact, or the legacy meaning of RV=N with a limit.
    return plan;
  }
  if (const std::string field = type.NodeNameIndexField(); !field.empty()) {
    plan.page.node_name_index = filter.fields.RequiresExactMatch(field);
  }
  return plan;
}

asio::awaitable<bool> WriteList(Exchange& x, Cacher& cacher, const WatchFilter& filter,
                                const ListPlan& plan, uint64_t at_rv, CacheServeStats& stats) {
  const ResourceType& t = cacher.type();
  Cacher::PageRequest req = plan.page;
  req.at_rv = plan.exact ? at_rv : 0;
  auto page = cacher.ListPage(filter, req);
  if (!page.ok()) co_return false;
  const Cacher::Page& list = *page;
  const std::string open =
      absl::StrCat("{\"kind\":\"", t.kind, "List\",\"apiVersion\":\"", t.ApiVersion(),
                   "\",\"metadata\":", ListMeta(list, filter, t, plan.page.limit), ",\"items\":[");
  static constexpr std::string_view kComma = ",";
  static constexpr std::string_view kClose = "]}\n";
  std::vector<asio::const_buffer> body;
  body.reserve(list.items.size() * 3 + 2);
  body.emplace_back(open.data(), open.size());
  for (size_t i = 0; i < list.items.size(); ++i) {
    if (i > 0) body.emplace_back(kComma.data(), kComma.size());
    auto [prefix, rest] = list.items[i]->list_item();
    if (!prefix.empty()) body.emplace_back(prefix.data(), prefix.size());
    body.emplace_back(rest.data(), rest.size());
  }
  body.emplace_back(kClose.data(), kClose.size());
  ++stats.lists;
  co_await WriteJson(x, 200, body, stats);
  co_return true;
}

asio::awaitable<void> WriteObject(Exchange& x, Cacher& cacher, CacheServeStats& stats) {
  const ResourceType& t = cacher.type();
  const RequestInfo& info = x.request.info;
  const ObjectPtr obj =
      cacher.Get(CachedObject::Key(t.namespaced ? info.namespace_ : "", info.name)).first;
  ++stats.gets;
  if (!obj) {
    const std::string body = EncodeStatusBody(NotFoundStatus(t.group, t.resource, info.name));
    const std::array<asio::const_buffer, 1> out{asio::buffer(body)};
    co_await WriteJson(x, 404, out, stats);
    co_return;
  }
  static constexpr std::string_view kNewline = "\n";
  const std::array<asio::const_buffer, 2> out{asio::buffer(obj->json()), asio::buffer(kNewline)};
  co_await WriteJson(x, 200, out, stats);
}

}  // namespace kf
