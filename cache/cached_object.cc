#include "cache/cached_object.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/selectable_fields.h"
#include "common/json.h"
#include "common/strings.h"
#include "rapidjson/document.h"

namespace kf {
namespace {

constexpr std::string_view kRvMember = "\"resourceVersion\":\"";

// Position of metadata.resourceVersion's value in `json`, see SpliceResourceVersion.
bool FindRv(std::string_view json, size_t* pos, size_t* len) {
  const size_t meta = json.find("\"metadata\":{");
  if (meta == std::string_view::npos) return false;
  const size_t at = json.find(kRvMember, meta);
  if (at == std::string_view::npos) return false;
  *pos = at + kRvMember.size();
  const size_t end = json.find('"', *pos);
  if (end == std::string_view::npos) return false;
  *len = end - *pos;
  return true;
}

// Where the fields after "kind" and "apiVersion" start, when the object begins with them.
size_t AfterTypeMeta(std::string_view json) {
  if (json.rfind("{\"kind\":\"", 0) != 0) return 0;
  const size_t api = json.find("\",\"apiVersion\":\"");
  if (api == std::string_view::npos) return 0;
  const size_t end = json.find('"', api + 16);
  if (end == std::string_view::npos || end + 1 >= json.size()) return 0;
  return json[end + 1] == ',' ? end + 2 : 0;
}

}  // namespace

std::string CachedObject::Key(std::string_view ns, std::string_view name) {
  return ns.empty() ? std::string(name) : absl::StrCat(ToAbsl(ns), "/", ToAbsl(name));
}

absl::StatusOr<std::shared_ptr<const CachedObject>> CachedObject::FromJson(const ResourceType& type,
                                                                           std::string json) {
  rapidjson::Document doc;
  if (!ParseJson(json, doc).ok() || !doc.IsObject()) {
    return absl::InvalidArgumentError("object is not a JSON object");
  }
  auto meta = doc.FindMember("metadata");
  if (meta == doc.MemberEnd() || !meta->value.IsObject()) {
    return absl::InvalidArgumentError("object has no metadata");
  }
  const rapidjson::Value& m = meta->value;
  auto str = [&m](const char* k) -> std::string {
    auto it = m.FindMember(k);
    return it != m.MemberEnd() && it->value.IsString()
               ? std::string(it->value.GetString(), it->value.GetStringLength())
               : std::string();
  };
  auto obj = std::shared_ptr<CachedObject>(new CachedObject());
  obj->name_ = str("name");
  obj->ns_ = str("namespace");
  if (!absl::SimpleAtoi(str("resourceVersion"), &obj->resource_version_)) {
    return absl::InvalidArgumentError("object has no numeric metadata.resourceVersion");
  }
  if (!FindRv(json, &obj->rv_value_pos_, &obj->rv_value_len_)) {
    return absl::InvalidArgumentError("cannot locate metadata.resourceVersion");
  }
  obj->key_ = Key(obj->ns_, obj->name_);
  if (auto labels = m.FindMember("labels"); labels != m.MemberEnd()) {
    obj->labels_ = LabelSet(labels->value);
  }
  obj->fields_ = type.Fields().Extract(doc);
  obj->list_item_body_ = type.list_items_have_type_meta ? 0 : AfterTypeMeta(json);
  obj->json_ = std::move(json);
  return std::shared_ptr<const CachedObject>(std::move(obj));
}

std::pair<std::string_view, std::string_view> CachedObject::list_item() const {
  if (list_item_body_ == 0) return {std::string_view(), json_};
  return {"{", std::string_view(json_).substr(list_item_body_)};
}

std::shared_ptr<const CachedObject> CachedObject::WithResourceVersion(uint64_t rv) const {
  auto copy = std::make_shared<CachedObject>(*this);
  const std::string digits = std::to_string(rv);
  copy->json_.replace(rv_value_pos_, rv_value_len_, digits);
  copy->rv_value_len_ = digits.size();
  copy->resource_version_ = rv;
  return copy;
}

absl::StatusOr<std::string> SpliceResourceVersion(std::string_view json, uint64_t rv) {
  size_t pos = 0, len = 0;
  if (!FindRv(json, &pos, &len)) return absl::InvalidArgumentError("no metadata.resourceVersion");
  std::string out(json);
  out.replace(pos, len, std::to_string(rv));
  return out;
}

}  // namespace kf
