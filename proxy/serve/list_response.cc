#include "proxy/serve/list_response.h"

#include <array>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/continue_token.h"
#include "cache/partial_metadata.h"
#include "common/api/cbor.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/strings.h"
#include "proxy/edge/gzip.h"
#include "proxy/edge/representation.h"

namespace kf {
namespace {

namespace http = beast::http;

// The head the apiserver's handlers write for an object or list.
ResponseHead Head(int status, size_t length, Encoding encoding) {
  ResponseHead head;
  head.status = status;
  head.fields.set(http::field::cache_control, "no-cache, private");
  head.fields.set(http::field::content_type, encoding == Encoding::kProtobuf ? kProtobufContentType
                                             : encoding == Encoding::kCbor   ? kCborContentType
                                                                             : "application/json");
  head.framing = ResponseHead::Framing::kWhole;
  head.length = length;
  return head;
}

// An answer whose body is past the threshold and whose client asks for gzip is compressed, as
// the apiserver's SerializeObject compresses (proxy/edge/gzip.h).
bool Compresses(const Exchange& x, size_t length) {
  return length > kGzipThresholdBytes && AcceptsGzip(x.request.headers);
}

asio::awaitable<void> WritePlain(Exchange& x, int status, std::span<const asio::const_buffer> body,
                                 Encoding encoding, CacheServeStats& stats) {
  const size_t length = asio::buffer_size(body);
  const beast::error_code ec =
      co_await WriteAnswer(*x.response, Head(status, length, encoding), body);
  if (ec) x.error = ec.message();
  stats.bytes_written += length;
}

asio::awaitable<void> WriteGzipped(Exchange& x, int status, const std::string& gzipped,
                                   Encoding encoding, CacheServeStats& stats) {
  ResponseHead head = Head(status, gzipped.size(), encoding);
  head.fields.set(http::field::content_encoding, "gzip");
  head.fields.insert(http::field::vary, "Accept-Encoding");
  const std::array<asio::const_buffer, 1> piece{asio::buffer(gzipped)};
  const beast::error_code ec = co_await WriteAnswer(*x.response, std::move(head), piece);
  if (ec) x.error = ec.message();
  stats.bytes_written += gzipped.size();
}

asio::awaitable<void> WriteBody(Exchange& x, int status, std::span<const asio::const_buffer> body,
                                Encoding encoding, CacheServeStats& stats) {
  if (Compresses(x, asio::buffer_size(body))) {
    const std::string gzipped = Gzip(body);
    co_await WriteGzipped(x, status, gzipped, encoding, stats);
    co_return;
  }
  co_await WritePlain(x, status, body, encoding, stats);
}

// The list's metadata: its RV and, for a page with more after it, the continue token (the key
// after the last item, relative to the listed prefix, as continue.go encodes it) and, without
// selectors, remainingItemCount (a shard selector does not count: the apiserver's
// SelectionPredicate.Empty looks at labels and fields only); shardInfo echoing a shard
// selector's normal form. JSON, or ListMeta's protobuf message.
std::string ListMeta(const Cacher::Page& list, const WatchFilter& filter, const ResourceType& t,
                     int64_t limit, Encoding encoding) {
  std::string token;
  std::optional<int64_t> remaining;
  if (list.has_more && !list.items.empty()) {
    const CachedObject& last = *list.items.back();
    const bool in_namespace = t.namespaced && !filter.namespace_.empty();
    const std::string start =
        absl::StrCat(in_namespace ? last.name() : last.key(), std::string(1, '\0'));
    token = EncodeContinue(start, static_cast<int64_t>(list.resource_version));
    if (filter.labels.Empty() && filter.fields.Empty()) remaining = list.candidates - limit;
  }
  const std::string rv = absl::StrCat(list.resource_version);
  const std::string& shard = filter.shard.String();
  if (encoding == Encoding::kProtobuf) return EncodeListMeta(rv, token, remaining, shard);
  if (t.list_items_have_type_meta) {
    // A custom resource's list is an UnstructuredList: a Go map, encoded with its keys sorted
    // and `continue` always present; it has no shardInfo (no SetShardInfo).
    std::string meta = absl::StrCat("{\"continue\":\"", token, "\"");
    if (remaining) absl::StrAppend(&meta, ",\"remainingItemCount\":", *remaining);
    return absl::StrCat(meta, ",\"resourceVersion\":\"", rv, "\"}");
  }
  std::string meta = absl::StrCat("{\"resourceVersion\":\"", rv, "\"");
  if (!token.empty()) absl::StrAppend(&meta, ",\"continue\":\"", token, "\"");
  if (remaining) absl::StrAppend(&meta, ",\"remainingItemCount\":", *remaining);
  // The normal form has no character JSON escapes (shard_selector.h).
  if (!shard.empty()) absl::StrAppend(&meta, ",\"shardInfo\":{\"selector\":\"", shard, "\"}");
  return meta + "}";
}

// A list's answer before it is written: the pieces over the items' own bytes and the few
// strings around them. Built in place (the pieces point into its strings); never moved.
struct ListAnswer {
  ListAnswer() = default;
  ListAnswer(const ListAnswer&) = delete;
  ListAnswer& operator=(const ListAnswer&) = delete;

  Cacher::Page page;
  // Protobuf: the envelope's head, the ListMeta field. CBOR: everything before the items.
  std::string head, meta_field;
  std::string open, close;  // JSON: before and after the items.
  std::vector<asio::const_buffer> body;
  size_t length = 0;
};

// A list in protobuf: the envelope around XList{1: ListMeta, 2: each item's message}.
void BuildProtoList(ListAnswer& a, std::string_view api_version, std::string_view list_kind,
                    const std::string& list_meta) {
  AppendBytesField(&a.meta_field, 1, list_meta);
  size_t raw = a.meta_field.size();
  for (const ObjectPtr& item : a.page.items)
    raw += item->proto_item_head().size() + item->bytes().size();
  a.head = UnknownHead(api_version, list_kind, raw);
  a.body.reserve(a.page.items.size() * 2 + 3);
  a.body.emplace_back(a.head.data(), a.head.size());
  a.body.emplace_back(a.meta_field.data(), a.meta_field.size());
  for (const ObjectPtr& item : a.page.items) {
    a.body.emplace_back(item->proto_item_head().data(), item->proto_item_head().size());
    a.body.emplace_back(item->bytes().data(), item->bytes().size());
  }
  a.body.emplace_back(kUnknownTail.data(), kUnknownTail.size());
}

// A list in JSON: built-in lists in their struct's field order; custom resources'
// (unstructured) sorted.
void BuildJsonList(ListAnswer& a, const ResourceType& t, const std::string& meta) {
  a.open = t.list_items_have_type_meta
               ? absl::StrCat("{\"apiVersion\":\"", t.ApiVersion(), "\",\"items\":[")
               : absl::StrCat("{\"kind\":\"", t.kind, "List\",\"apiVersion\":\"", t.ApiVersion(),
                              "\",\"metadata\":", meta, ",\"items\":[");
  a.close = t.list_items_have_type_meta
                ? absl::StrCat("],\"kind\":\"", t.kind, "List\",\"metadata\":", meta, "}\n")
                : std::string("]}\n");
  static constexpr std::string_view kComma = ",";
  a.body.reserve(a.page.items.size() * 3 + 2);
  a.body.emplace_back(a.open.data(), a.open.size());
  for (size_t i = 0; i < a.page.items.size(); ++i) {
    if (i > 0) a.body.emplace_back(kComma.data(), kComma.size());
    auto [prefix, rest] = a.page.items[i]->list_item();
    if (!prefix.empty()) a.body.emplace_back(prefix.data(), prefix.size());
    a.body.emplace_back(rest.data(), rest.size());
  }
  a.body.emplace_back(a.close.data(), a.close.size());
}

// A PartialObjectMetadataList in JSON: items with their TypeMeta, and `null` for none (the
// conversion's nil slice).
void BuildPartialMetadataList(ListAnswer& a, const std::string& meta) {
  a.open = absl::StrCat("{\"kind\":\"", ToAbsl(kPartialMetadataListKind), "\",\"apiVersion\":\"",
                        ToAbsl(kPartialMetadataApiVersion), "\",\"metadata\":", meta,
                        a.page.items.empty() ? ",\"items\":null" : ",\"items\":[");
  a.close = a.page.items.empty() ? "}\n" : "]}\n";
  static constexpr std::string_view kComma = ",";
  a.body.reserve(a.page.items.size() * 2 + 2);
  a.body.emplace_back(a.open.data(), a.open.size());
  for (size_t i = 0; i < a.page.items.size(); ++i) {
    if (i > 0) a.body.emplace_back(kComma.data(), kComma.size());
    a.body.emplace_back(a.page.items[i]->json().data(), a.page.items[i]->json().size());
  }
  a.body.emplace_back(a.close.data(), a.close.size());
}

// A GET's NotFound Status. A Status has protobuf even where the object does not (a custom
// resource): client-go's Accept gets it in protobuf, as from the apiserver. Negotiated without
// conversions, as the apiserver negotiates errors: the metadata client's protobuf clause asks
// for one, so its NotFound is JSON. `cbor`: the upstream serves CBOR, so a CBOR clause gets it.
asio::awaitable<void> WriteNotFound(Exchange& x, const ResourceType& t, bool cbor,
                                    CacheServeStats& stats) {
  const RequestInfo& info = x.request.info;
  // (drop= reaches here only where the upstream's answer to it is known: it drops nothing
  // from a Status.)
  const Representation media =
      NegotiateRepresentation(info, x.request.headers, /*has_protobuf=*/true,
                              /*allow_conversion=*/false, cbor, Drop::kIgnored);
  const KubeStatus status = NotFoundStatus(t.group, t.resource, info.name);
  Encoding encoding = Encoding::kJson;
  std::string body;
  if (media.media == MediaChoice::kProtobuf) {
    encoding = Encoding::kProtobuf;
    body = EncodeStatusProto(status);
  } else if (media.media == MediaChoice::kCbor) {
    encoding = Encoding::kCbor;
    auto transcoded = JsonToCbor(EncodeStatusBody(status));  // Our own JSON: it transcodes.
    body = std::string(kCborSelfDescribed) + (transcoded.ok() ? transcoded->bytes : "\xf6");
  } else {
    body = EncodeStatusBody(status);
  }
  const std::array<asio::const_buffer, 1> out{asio::buffer(body)};
  co_await WriteBody(x, 404, out, encoding, stats);
}

// A list in CBOR: the self-described map {kind, apiVersion, metadata, items}, the items the
// objects' shared CBOR forms (their list item form: no type fields for built-in kinds).
void BuildCborList(ListAnswer& a, const ResourceType& t, const std::string& json_meta,
                   std::string_view bytes_map) {
  for (ObjectPtr& item : a.page.items) item = item->Cbor(bytes_map);  // Of the form already.
  auto meta = JsonToCbor(json_meta);
  a.head = std::string(kCborSelfDescribed);
  AppendCborHead(&a.head, 5, 4);
  AppendCborString(&a.head, "kind");
  AppendCborString(&a.head, absl::StrCat(t.kind, "List"));
  AppendCborString(&a.head, "apiVersion");
  AppendCborString(&a.head, t.ApiVersion());
  AppendCborString(&a.head, "metadata");
  a.head += meta.ok() ? meta->bytes : "\xa0";
  AppendCborString(&a.head, "items");
  AppendCborHead(&a.head, 4, a.page.items.size());
  a.body.reserve(a.page.items.size() * 2 + 1);
  a.body.emplace_back(a.head.data(), a.head.size());
  for (const ObjectPtr& item : a.page.items) {
    auto [prefix, rest] = item->list_item();
    if (!prefix.empty()) a.body.emplace_back(prefix.data(), prefix.size());
    a.body.emplace_back(rest.data(), rest.size());
  }
}

// False: the state at that RV has left the window.
bool BuildList(ListAnswer& a, const Cacher& cacher, const WatchFilter& filter, const ListPlan& plan,
               uint64_t at_rv) {
  Cacher::PageRequest req = plan.page;
  req.at_rv = plan.exact ? at_rv : 0;
  auto page = cacher.ListPage(filter, req);
  if (!page.ok()) return false;
  a.page = *std::move(page);
  const ResourceType& t = cacher.type();
  const std::string meta = ListMeta(a.page, filter, t, plan.page.limit, cacher.encoding());
  if (filter.drop_managed_fields) {
    for (ObjectPtr& item : a.page.items) item = CachedObject::WithoutManagedFields(item);
  }
  if (filter.cbor) {
    BuildCborList(a, t, meta, filter.cbor_bytes_map);
    a.length = asio::buffer_size(a.body);
    return true;
  }
  if (filter.partial_metadata) {
    for (ObjectPtr& item : a.page.items) item = item->PartialMetadata();
  }
  if (cacher.encoding() == Encoding::kProtobuf && filter.partial_metadata) {
    BuildProtoList(a, kPartialMetadataApiVersion, kPartialMetadataListKind, meta);
  } else if (cacher.encoding() == Encoding::kProtobuf) {
    BuildProtoList(a, t.ApiVersion(), absl::StrCat(t.kind, "List"), meta);
  } else if (filter.partial_metadata) {
    BuildPartialMetadataList(a, meta);
  } else {
    BuildJsonList(a, t, meta);
  }
  a.length = asio::buffer_size(a.body);
  return true;
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
                                const ListPlan& plan, uint64_t at_rv, CacheServeStats& stats,
                                ListBuilding building) {
  ListAnswer a;
  bool found = false;
  GzipCache::Bytes gzipped;
  const bool accepts_gzip = AcceptsGzip(x.request.headers);
  // The answer's identity for the shared compressed bytes: the same target of the same cache
  // at the same RV is the same list (the state at an RV is the apiserver's at that RV), and the
  // length is checked too. Read here, on the session's thread; completed where it is built.
  const ResourceType& t = cacher.type();
  const std::string identity =
      absl::StrCat(t.ApiVersion(), " ", t.resource, " ",
                   cacher.encoding() == Encoding::kProtobuf ? "protobuf "
                   : filter.cbor                            ? "cbor "
                                                            : "json ",
                   filter.partial_metadata ? "metadata " : "",
                   filter.drop_managed_fields ? "nomanagedfields " : "", ToAbsl(x.request.target));
  const auto build = [&] { found = BuildList(a, cacher, filter, plan, at_rv); };
  const auto compress = [&] {
    if (!found || !accepts_gzip || a.length <= kGzipThresholdBytes) return;
    const auto gzip = [&] { return Gzip(a.body); };
    if (building.gzip == nullptr) {
      gzipped = std::make_shared<const std::string>(gzip());
      return;
    }
    // Without a list pool this runs on an I/O thread, which must not wait for another's
    // compression.
    gzipped = building.gzip->Get(
        absl::StrCat(identity, " rv=", a.page.resource_version, " length=", a.length), gzip,
        /*wait=*/building.builds != nullptr);
  };
  const auto build_and_compress = [&] {
    build();
    compress();
  };
  const bool large =
      cacher.object_count() >= ListBuilding::kPoolObjects && !plan.page.node_name_index;
  if (building.builds != nullptr && large) {
    co_await building.builds->Run(build_and_compress);
  } else {
    build();
    if (building.builds != nullptr && found && Compresses(x, a.length)) {
      co_await building.builds->Run(compress);
    } else {
      compress();
    }
  }
  if (!found) co_return false;
  ++stats.lists;
  if (gzipped) {
    co_await WriteGzipped(x, 200, *gzipped, WireEncoding(cacher, filter), stats);
  } else {
    co_await WritePlain(x, 200, a.body, WireEncoding(cacher, filter), stats);
  }
  co_return true;
}

asio::awaitable<bool> WriteObject(Exchange& x, Cacher& cacher, CacheServeStats& stats,
                                  const WatchFilter* form, bool miss_is_upstreams) {
  const ResourceType& t = cacher.type();
  const RequestInfo& info = x.request.info;
  ObjectPtr obj =
      cacher.Get(CachedObject::Key(t.namespaced ? info.namespace_ : "", info.name)).first;
  if (!obj && miss_is_upstreams) co_return false;  // Declined: counted by the caller.
  const bool cbor = form != nullptr && form->cbor;
  if (obj && form != nullptr && form->drop_managed_fields) {
    obj = CachedObject::WithoutManagedFields(obj);
  }
  if (obj && form != nullptr && form->partial_metadata) obj = obj->PartialMetadata();
  if (obj && cbor) obj = obj->Cbor(form->cbor_bytes_map);
  ++stats.gets;
  if (!obj) {
    co_await WriteNotFound(x, t, cbor, stats);
    co_return true;
  }
  if (obj->encoding() == Encoding::kProtobuf) {
    const std::array<asio::const_buffer, 3> out{asio::buffer(obj->proto_get_head()),
                                                asio::buffer(obj->bytes()),
                                                asio::buffer(kUnknownTail)};
    co_await WriteBody(x, 200, out, Encoding::kProtobuf, stats);
    co_return true;
  }
  if (obj->encoding() == Encoding::kCbor) {
    const std::array<asio::const_buffer, 2> out{asio::buffer(kCborSelfDescribed),
                                                asio::buffer(obj->bytes())};
    co_await WriteBody(x, 200, out, Encoding::kCbor, stats);
    co_return true;
  }
  static constexpr std::string_view kNewline = "\n";
  const std::array<asio::const_buffer, 2> out{asio::buffer(obj->json()), asio::buffer(kNewline)};
  co_await WriteBody(x, 200, out, Encoding::kJson, stats);
  co_return true;
}

}  // namespace kf
