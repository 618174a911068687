#include "cache/cached_object.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/managed_fields.h"
#include "cache/partial_metadata.h"
#include "cache/selectable_fields.h"
#include "common/api/cbor.h"
#include "common/api/json.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
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
  obj->shard_hashes_ = ShardHashes::Of(str("uid"), obj->ns_);
  if (auto labels = m.FindMember("labels"); labels != m.MemberEnd()) {
    obj->labels_ = LabelSet(labels->value);
  }
  obj->fields_ = type.Fields().Extract(doc);
  obj->list_item_body_ = type.list_items_have_type_meta ? 0 : AfterTypeMeta(json);
  obj->json_ = std::move(json);
  return std::shared_ptr<const CachedObject>(std::move(obj));
}

absl::StatusOr<std::shared_ptr<const CachedObject>> CachedObject::FromProtobuf(
    const ResourceType& type, std::string message) {
  std::string_view meta;
  if (!FindBytesField(message, 1, &meta)) {
    return absl::InvalidArgumentError("object has no metadata");
  }
  auto obj = std::shared_ptr<CachedObject>(new CachedObject());
  obj->encoding_ = Encoding::kProtobuf;
  std::vector<LabelSet::Pair> labels;
  std::string_view rv, uid;
  ProtoReader r(meta);
  ProtoField f;
  while (r.Next(&f)) {
    if (f.type != WireType::kBytes) continue;
    switch (f.number) {
      case 1:
        obj->name_ = std::string(f.bytes);
        break;
      case 3:
        obj->ns_ = std::string(f.bytes);
        break;
      case 5:
        uid = f.bytes;
        break;
      case 6:
        rv = f.bytes;
        break;
      case 11: {
        std::string_view key, value;
        (void)FindBytesField(f.bytes, 1, &key);
        (void)FindBytesField(f.bytes, 2, &value);
        labels.emplace_back(std::string(key), std::string(value));
        break;
      }
      default:
        break;
    }
  }
  if (!r.ok()) return absl::InvalidArgumentError("object metadata is not a protobuf message");
  if (!absl::SimpleAtoi(ToAbsl(rv), &obj->resource_version_)) {
    return absl::InvalidArgumentError("object has no numeric metadata.resourceVersion");
  }
  obj->key_ = Key(obj->ns_, obj->name_);
  obj->shard_hashes_ = ShardHashes::Of(uid, obj->ns_);
  obj->labels_ = LabelSet(std::move(labels));
  obj->fields_ = type.Fields().ExtractProto(message);
  obj->json_ = std::move(message);
  obj->BuildProtoHeads(type.ApiVersion(), type.kind);
  return std::shared_ptr<const CachedObject>(std::move(obj));
}

void CachedObject::BuildProtoHeads(std::string_view api_version, std::string_view kind) {
  const std::string get_head = UnknownHead(api_version, kind, json_.size());
  const size_t envelope = get_head.size() + json_.size() + kUnknownTail.size();
  proto_heads_.clear();
  int i = 0;
  for (std::string_view type : {"ADDED", "MODIFIED", "DELETED"}) {
    absl::StrAppend(&proto_heads_, WatchFramePrefix(type, envelope), get_head);
    frame_head_end_[i++] = static_cast<uint16_t>(proto_heads_.size());
  }
  get_head_len_ = static_cast<uint16_t>(get_head.size());
  item_head_len_ = static_cast<uint8_t>(1 + VarintSize(json_.size()));
}

std::string_view CachedObject::proto_frame_head(int type_index) const {
  const size_t begin = type_index == 0 ? 0 : frame_head_end_[type_index - 1];
  return std::string_view(proto_heads_).substr(begin, frame_head_end_[type_index] - begin);
}

std::string_view CachedObject::proto_get_head() const {
  return std::string_view(proto_heads_).substr(frame_head_end_[0] - get_head_len_, get_head_len_);
}

std::string_view CachedObject::proto_item_head() const {
  return std::string_view(proto_heads_).substr(frame_head_end_[0] - item_head_len_, item_head_len_);
}

std::pair<std::string_view, std::string_view> CachedObject::list_item() const {
  if (list_item_body_ == 0) return {std::string_view(), json_};
  const std::string_view head =
      encoding_ == Encoding::kCbor ? std::string_view(proto_heads_) : std::string_view("{");
  return {head, std::string_view(json_).substr(list_item_body_)};
}

const std::shared_ptr<const CachedObject>& CachedObject::Cbor(std::string_view bytes_map) const {
  const LazyForm& lazy = cbor_;
  std::call_once(lazy.once_, [this, &lazy, bytes_map] {
    auto form = std::shared_ptr<CachedObject>(new CachedObject());
    form->key_ = key_;
    form->ns_ = ns_;
    form->name_ = name_;
    form->resource_version_ = resource_version_;
    form->encoding_ = Encoding::kCbor;
    auto cbor = JsonToCbor(json_, bytes_map);
    if (!cbor.ok()) {
      form->json_ = "\xf6";
    } else {
      form->json_ = std::move(cbor->bytes);
      if (list_item_body_ != 0 && cbor->after_type_meta != 0) {
        form->list_item_body_ = cbor->after_type_meta;
        AppendCborHead(&form->proto_heads_, 5, cbor->members_after_type_meta);
      }
    }
    lazy.form_ = std::move(form);
  });
  return lazy.form_;
}

const std::shared_ptr<const CachedObject>& CachedObject::PartialMetadata() const {
  const LazyForm& lazy = partial_metadata_;
  std::call_once(lazy.once_, [this, &lazy] {
    auto form = std::shared_ptr<CachedObject>(new CachedObject());
    form->key_ = key_;
    form->ns_ = ns_;
    form->name_ = name_;
    form->resource_version_ = resource_version_;
    form->encoding_ = encoding_;
    // Parsed once already, so the metadata is there; should it not be, the object stands in.
    auto bytes =
        encoding_ == Encoding::kProtobuf ? PartialMetadataProto(json_) : PartialMetadataJson(json_);
    if (!bytes.ok()) {
      lazy.form_ = WithResourceVersion(resource_version_);
      return;
    }
    form->json_ = *std::move(bytes);
    if (encoding_ == Encoding::kProtobuf) {
      form->BuildProtoHeads(kPartialMetadataApiVersion, kPartialMetadataKind);
    } else {
      (void)FindRv(form->json_, &form->rv_value_pos_, &form->rv_value_len_);
    }
    lazy.form_ = std::move(form);
  });
  return lazy.form_;
}

void CachedObject::RebuildProtoHeads() {
  // The TypeMeta is the first field after the magic in the GET head.
  std::string_view type_meta, api_version, kind;
  (void)FindBytesField(proto_get_head().substr(kProtobufMagic.size()), 1, &type_meta);
  (void)FindBytesField(type_meta, 1, &api_version);
  (void)FindBytesField(type_meta, 2, &kind);
  const std::string api(api_version), k(kind);
  BuildProtoHeads(api, k);
}

const std::shared_ptr<const CachedObject>& CachedObject::WithoutManagedFields(
    const std::shared_ptr<const CachedObject>& object) {
  const CachedObject& o = *object;
  const LazyForm& lazy = o.without_managed_fields_;
  std::call_once(lazy.once_, [&o, &lazy] {
    // CBOR forms are built from a form of the JSON object, never asked for this.
    std::optional<std::string> bytes =
        o.encoding_ == Encoding::kProtobuf ? ProtoWithoutManagedFields(o.json_)
        : o.encoding_ == Encoding::kJson   ? JsonWithoutManagedFields(o.json_)
                                           : std::nullopt;
    if (!bytes) return;
    auto form = std::make_shared<CachedObject>(o);
    form->json_ = *std::move(bytes);
    if (o.encoding_ == Encoding::kProtobuf) {
      form->RebuildProtoHeads();
    } else if (!FindRv(form->json_, &form->rv_value_pos_, &form->rv_value_len_)) {
      return;  // Parsed once already, and the member taken out is not it: cannot happen.
    }
    lazy.form_ = std::move(form);
  });
  return lazy.form_ ? lazy.form_ : object;
}

std::shared_ptr<const CachedObject> CachedObject::WithResourceVersion(uint64_t rv) const {
  auto copy = std::make_shared<CachedObject>(*this);
  if (encoding_ == Encoding::kProtobuf) {
    auto spliced = SpliceProtoMetadata(json_, rv);
    if (!spliced.ok()) return copy;  // Parsed once already: cannot happen.
    copy->json_ = *std::move(spliced);
    copy->resource_version_ = rv;
    copy->RebuildProtoHeads();
    return copy;
  }
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

absl::StatusOr<std::string> SpliceProtoMetadata(
    std::string_view message, uint64_t rv,
    const std::pair<std::string_view, std::string_view>* add_annotation,
    std::string_view drop_annotation) {
  std::string_view meta;
  size_t meta_begin = 0, meta_end = 0;
  {
    ProtoReader r(message);
    ProtoField f;
    bool found = false;
    while (r.Next(&f)) {
      if (f.number == 1 && f.type == WireType::kBytes) {
        meta = f.bytes;
        meta_begin = f.begin;
        meta_end = f.end;
        found = true;
        break;
      }
    }
    if (!found) return absl::InvalidArgumentError("no metadata");
  }
  std::string out_meta;
  bool rv_done = false, annotation_done = add_annotation == nullptr;
  auto annotation = [&] {
    std::string entry;
    AppendBytesField(&entry, 1, add_annotation->first);
    AppendBytesField(&entry, 2, add_annotation->second);
    AppendBytesField(&out_meta, 12, entry);
    annotation_done = true;
  };
  ProtoReader r(meta);
  ProtoField f;
  while (r.Next(&f)) {
    if (!annotation_done && f.number > 12) annotation();
    if (f.number == 6 && f.type == WireType::kBytes) {
      AppendBytesField(&out_meta, 6, absl::StrCat(rv));
      rv_done = true;
      continue;
    }
    if (f.number == 12 && f.type == WireType::kBytes && !drop_annotation.empty()) {
      std::string_view key;
      if (FindBytesField(f.bytes, 1, &key) && key == drop_annotation) continue;
    }
    out_meta.append(meta.substr(f.begin, f.end - f.begin));
  }
  if (!r.ok()) return absl::InvalidArgumentError("metadata is not a protobuf message");
  if (!rv_done) return absl::InvalidArgumentError("no metadata.resourceVersion");
  if (!annotation_done) annotation();
  std::string out(message.substr(0, meta_begin));
  AppendBytesField(&out, 1, out_meta);
  out.append(message.substr(meta_end));
  return out;
}

}  // namespace kf
