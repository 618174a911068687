#include "common/api/upstream_list.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/api/json.h"
#include "common/api/protowire.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "rapidjson/reader.h"

namespace kf {
namespace {

// SAX handler that records the byte range of each element of the top-level "items" array and
// the list's kind, apiVersion and metadata fields. Driven by RapidJSON's iterative parser,
// which calls StartObject and EndObject before it consumes the brace: Tell() is the brace's
// offset in both.
class ListHandler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, ListHandler> {
 public:
  explicit ListHandler(const rapidjson::StringStream& in, ListPage* page) : in_(in), page_(page) {}

  bool Default() { return true; }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (depth_ == 1 && key_ == "kind") page_->kind.assign(s, n);
    if (depth_ == 1 && key_ == "apiVersion") page_->api_version.assign(s, n);
    if (depth_ == 2 && in_metadata_ && key_ == "resourceVersion") {
      if (!absl::SimpleAtoi(absl::string_view(s, n), &page_->resource_version)) return false;
    }
    if (depth_ == 2 && in_metadata_ && key_ == "continue") page_->continue_token.assign(s, n);
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (depth_ <= 2) key_.assign(s, n);
    return true;
  }
  bool StartObject() {
    ++depth_;
    if (depth_ == 2 && key_ == "metadata" && !in_items_) in_metadata_ = true;
    if (depth_ == 3 && in_metadata_ && key_ == "shardInfo") page_->shard_info = true;
    if (in_items_ && depth_ == 2) item_start_ = in_.Tell();
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    if (in_items_ && depth_ == 2) {
      ends_.push_back(in_.Tell() + 1);
      starts_.push_back(item_start_);
    }
    if (depth_ == 2) in_metadata_ = false;
    --depth_;
    return true;
  }
  bool StartArray() {
    if (depth_ == 1 && key_ == "items") in_items_ = true;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    if (depth_ == 1 && in_items_) in_items_ = false;
    return true;
  }

  std::vector<size_t> starts_, ends_;

 private:
  const rapidjson::StringStream& in_;
  ListPage* page_;
  int depth_ = 0;
  bool in_items_ = false;
  bool in_metadata_ = false;
  size_t item_start_ = 0;
  std::string key_;
};

}  // namespace

absl::StatusOr<ListPage> ParseListPage(std::string_view body) {
  // RapidJSON needs a NUL-terminated buffer.
  std::string copy(body);
  rapidjson::StringStream in(copy.c_str());
  ListPage page;
  ListHandler handler(in, &page);
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse list response at offset ", nul));
  }
  if (JsonDepth(body, JsonLimits{}.max_depth) > JsonLimits{}.max_depth) {
    return absl::InvalidArgumentError("list response exceeds the maximum nesting depth");
  }
  rapidjson::Reader reader;
  if (!reader.Parse<kJsonParseFlags>(in, handler)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse list response at offset ", reader.GetErrorOffset()));
  }
  page.items.clear();
  for (size_t i = 0; i < handler.starts_.size(); ++i) {
    page.items.push_back(body.substr(handler.starts_[i], handler.ends_[i] - handler.starts_[i]));
  }
  if (page.kind.size() > 4 && page.kind.compare(page.kind.size() - 4, 4, "List") == 0) {
    return page;
  }
  return absl::InvalidArgumentError(absl::StrCat("not a list: kind \"", page.kind, "\""));
}

std::string ItemToEventForm(std::string_view item, std::string_view kind,
                            std::string_view api_version) {
  if (item.rfind("{\"kind\":", 0) == 0 || item.size() < 2) return std::string(item);
  // Kind and apiVersion come from the list's own (decoded) fields, so they are encoded again;
  // an item without members ("{}") takes no comma after them.
  const std::string_view rest = item.substr(1);
  const size_t first = rest.find_first_not_of(" \t\r\n");
  const bool no_members = first != std::string_view::npos && rest[first] == '}';
  return absl::StrCat("{\"kind\":", GoJsonString(kind),
                      ",\"apiVersion\":", GoJsonString(api_version), no_members ? "" : ",",
                      ToAbsl(rest));
}

absl::StatusOr<WatchLine> ParseWatchLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  rapidjson::Document doc;
  if (!ParseJson(line, doc).ok() || !doc.IsObject() || !doc.HasMember("type") ||
      !doc["type"].IsString() || !doc.HasMember("object") || !doc["object"].IsObject()) {
    return absl::InvalidArgumentError("malformed watch event");
  }
  WatchLine out;
  out.type = doc["type"].GetString();
  // Go writes {"type":"X","object":<object>}: with those two members only and in that order, the
  // object is everything after "object": up to the final brace. (Searching for ,"object": alone
  // would cut an object out of other members', e.g. a nested or repeated "object".)
  const std::string prefix = absl::StrCat("{\"type\":", GoJsonString(out.type), ",\"object\":");
  if (doc.MemberCount() != 2 || line.substr(0, prefix.size()) != prefix || line.back() != '}') {
    return absl::InvalidArgumentError("unexpected watch event layout");
  }
  out.object = line.substr(prefix.size(), line.size() - 1 - prefix.size());
  const rapidjson::Value& obj = doc["object"];
  if (auto meta = obj.FindMember("metadata"); meta != obj.MemberEnd() && meta->value.IsObject()) {
    if (auto rv = meta->value.FindMember("resourceVersion");
        rv != meta->value.MemberEnd() && rv->value.IsString()) {
      (void)absl::SimpleAtoi(rv->value.GetString(), &out.resource_version);
    }
  }
  if (out.type == "ERROR") {
    if (auto c = obj.FindMember("code"); c != obj.MemberEnd() && c->value.IsInt()) {
      out.error_code = c->value.GetInt();
    }
    if (auto m = obj.FindMember("message"); m != obj.MemberEnd() && m->value.IsString()) {
      out.error_message = m->value.GetString();
    }
  }
  return out;
}

bool ParseProtoList(std::string_view body, ProtoListPage* out) {
  UnknownView u;
  if (!ParseUnknown(body, &u)) return false;
  *out = ProtoListPage{};
  out->api_version = std::string(u.api_version);
  out->kind = std::string(u.kind);
  ProtoReader r(u.raw);
  ProtoField f;
  while (r.Next(&f)) {
    if (f.type != WireType::kBytes) continue;
    if (f.number == 1) {
      ProtoReader m(f.bytes);
      ProtoField g;
      while (m.Next(&g)) {
        if (g.type != WireType::kBytes) continue;
        if (g.number == 5) out->shard_info = true;
        if (g.number == 2 && !absl::SimpleAtoi(ToAbsl(g.bytes), &out->resource_version)) {
          return false;
        }
        if (g.number == 3) out->continue_token = std::string(g.bytes);
      }
      if (!m.ok()) return false;
    } else if (f.number == 2) {
      out->items.push_back(f.bytes);
    }
  }
  return r.ok();
}

bool ParseProtoWatchEvent(std::string_view message, ProtoWatchEvent* out) {
  *out = ProtoWatchEvent{};
  ProtoReader r(message);
  ProtoField f;
  bool have_object = false;
  while (r.Next(&f)) {
    if (f.type != WireType::kBytes) continue;
    if (f.number == 1) out->type = f.bytes;
    if (f.number == 2) {
      std::string_view envelope;
      if (!FindBytesField(f.bytes, 1, &envelope)) return false;
      if (!ParseUnknown(envelope, &out->object)) return false;
      out->object_envelope = envelope;
      have_object = true;
    }
  }
  return r.ok() && have_object && !out->type.empty();
}

}  // namespace kf
