// CachedObject: one object as the cache holds it. Immutable once built and shared by
// reference (store, event window, watchers' queues), so an object's bytes exist once however
// many watchers receive them.
//
// In JSON, the bytes are the upstream's own serialization of the object with kind/apiVersion
// (the form watch events carry), byte for byte; the LIST item form is a view of the same bytes
// without the type fields, as the apiserver encodes items of built-in lists. In protobuf, the
// bytes are the object's own message as the apiserver wrote it (Unknown.raw), and the object
// also keeps the few envelope bytes that precede it in a GET body, a LIST item and each kind
// of watch frame (common/api/kube_proto.h), so no answer re-encodes anything.
#ifndef KUBE_FANOUT_CACHE_CACHED_OBJECT_H_
#define KUBE_FANOUT_CACHE_CACHED_OBJECT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "cache/labels.h"
#include "cache/selectable_fields.h"
#include "cache/shard_selector.h"

namespace kf {

// What a cache knows about its resource type.
// The two wire forms a cache can hold objects in, and CBOR, a form of a JSON cache's object
// (CachedObject::Cbor).
enum class Encoding { kJson, kProtobuf, kCbor };

struct ResourceType {
  std::string group;     // "" for core.
  std::string version;   // "v1".
  std::string resource;  // "pods".
  std::string kind;      // "Pod".
  bool namespaced = true;
  bool list_items_have_type_meta = false;  // True for custom resources (unstructured).

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // The field kubelets select pods by, indexed for watches and lists so an event or a list
  // visits one node's objects and watchers; "" for other kinds. The one index rule.
  std::string NodeNameIndexField() const {
    return group.empty() && resource == "pods" ? "spec.nodeName" : "";
  }
  std::string GroupResource() const { return group.empty() ? resource : resource + "." + group; }
  // The member of this kind's objects whose values are Go []byte, which CBOR writes as byte
  // strings (CachedObject::Cbor): ConfigMap binaryData, Secret data; "" for none.
  std::string_view CborBytesMap() const {
    if (!group.empty() || list_items_have_type_meta) return {};
    return resource == "configmaps" ? "binaryData" : resource == "secrets" ? "data" : "";
  }
  // What field selectors may name for this type. Custom resources get metadata fields only
  // (their CRD's selectableFields are not read yet).
  SelectableFields Fields() const {
    return list_items_have_type_meta ? SelectableFields::ForCustomResource(namespaced, {})
                                     : SelectableFields::ForResource(group, resource);
  }
};

// How many watchers' queues hold an object's frame: the process-wide queue budget counts the
// object's bytes once while any does (cache/queue_budget.h). Holds are taken under the owning
// cache's lock (one at a time for an object); drops come from any thread. Not copied with its
// object: a copy is queued nowhere yet.
class QueueHolds {
 public:
  QueueHolds() = default;
  QueueHolds(const QueueHolds& /*other*/) noexcept {}
  QueueHolds& operator=(const QueueHolds& /*other*/) noexcept { return *this; }
  // True for the first hold (the object's bytes come into the budget) and the last drop (they
  // leave it).
  bool Hold() const noexcept { return n_.fetch_add(1, std::memory_order_relaxed) == 0; }
  bool Drop() const noexcept { return n_.fetch_sub(1, std::memory_order_relaxed) == 1; }
  uint32_t count() const noexcept { return n_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<uint32_t> n_{0};
};

class CachedObject;

// Another form of an object (PartialObjectMetadata, CBOR), built on first use and kept with the
// object, so every answer and watcher that asks for it shares one encoding. Not copied with its
// object: a copy (another resourceVersion) has its own.
class LazyForm {
 public:
  LazyForm() = default;
  LazyForm(const LazyForm& /*other*/) noexcept {}
  LazyForm& operator=(const LazyForm& /*other*/) noexcept { return *this; }

 private:
  friend class CachedObject;
  mutable std::once_flag once_;
  mutable std::shared_ptr<const CachedObject> form_;
};

class CachedObject {
 public:
  // Parses an object in event form ({"kind":..,"apiVersion":..,"metadata":{..},..}).
  static absl::StatusOr<std::shared_ptr<const CachedObject>> FromJson(const ResourceType& type,
                                                                      std::string json);
  // From an object's protobuf message (the `raw` of its envelope).
  static absl::StatusOr<std::shared_ptr<const CachedObject>> FromProtobuf(const ResourceType& type,
                                                                          std::string message);

  Encoding encoding() const { return encoding_; }

  // The storage key: "namespace/name" or "name"; sorts as the apiserver's keys do.
  const std::string& key() const { return key_; }
  const std::string& namespace_() const { return ns_; }
  const std::string& name() const { return name_; }
  uint64_t resource_version() const { return resource_version_; }
  const LabelSet& labels() const { return labels_; }
  const FieldSet& fields() const { return fields_; }
  // Its uid's and namespace's hashes as shard selectors read them (computed once, here).
  const ShardHashes& shard_hashes() const { return shard_hashes_; }
  // The object's bytes: its JSON, or its protobuf message.
  std::string_view bytes() const { return json_; }
  std::string_view json() const { return json_; }
  // The LIST item form (no kind/apiVersion for built-in types), as two pieces to write one
  // after the other: "{" and the object's bytes after its type fields (or "" and all of it).
  std::pair<std::string_view, std::string_view> list_item() const;

  // Protobuf only: what precedes bytes() in a watch frame of `type_index` (0 ADDED, 1 MODIFIED,
  // 2 DELETED), in a GET body (magic, TypeMeta, raw's tag and length) and in a LIST body (the
  // item's tag and length). Each is followed by bytes(); frames and GET bodies then end with
  // kUnknownTail.
  std::string_view proto_frame_head(int type_index) const;
  std::string_view proto_get_head() const;
  std::string_view proto_item_head() const;

  // The object as a meta.k8s.io/v1 PartialObjectMetadata (cache/partial_metadata.h), in the same
  // encoding: built once, on first use, and shared. Its list item form keeps its TypeMeta.
  const std::shared_ptr<const CachedObject>& PartialMetadata() const;

  // A JSON object in CBOR (common/api/cbor.h; `bytes_map`: ResourceType::CborBytesMap), as the
  // apiserver's CBOR serializer writes it, without the self-described tag: built once, on first
  // use, and shared. Its list item form drops kind and apiVersion as the JSON one does. Should
  // the JSON not transcode (it parsed once already, so it does), the form is CBOR null.
  const std::shared_ptr<const CachedObject>& Cbor(std::string_view bytes_map) const;

  // `object` without metadata.managedFields (cache/managed_fields.h), in the same encoding, for
  // the flows an operator names: built once, on first use, and shared, with forms of its own
  // (PartialMetadata, Cbor). `object` itself when it has none.
  static const std::shared_ptr<const CachedObject>& WithoutManagedFields(
      const std::shared_ptr<const CachedObject>& object);

  // A copy whose metadata.resourceVersion is `rv` (DELETED events carry the deletion's RV).
  std::shared_ptr<const CachedObject> WithResourceVersion(uint64_t rv) const;

  static std::string Key(std::string_view ns, std::string_view name);

  // The watchers' queues holding this object's frame (QueueHolds).
  const QueueHolds& queue_holds() const { return queue_holds_; }

 private:
  CachedObject() = default;
  void BuildProtoHeads(std::string_view api_version, std::string_view kind);
  // BuildProtoHeads with the TypeMeta the object's GET head holds (after bytes() changed).
  void RebuildProtoHeads();

  std::string key_;
  std::string ns_;
  std::string name_;
  uint64_t resource_version_ = 0;
  LabelSet labels_;
  FieldSet fields_;
  ShardHashes shard_hashes_;
  std::string json_;
  size_t list_item_body_ = 0;  // Offset of the first field after kind/apiVersion, or 0.
  size_t rv_value_pos_ = 0;    // Offset and length of metadata.resourceVersion's digits.
  size_t rv_value_len_ = 0;
  Encoding encoding_ = Encoding::kJson;
  // Protobuf: the three frame heads one after the other; each ends with the GET head, which
  // ends with the item head. CBOR: the list item's map head.
  std::string proto_heads_;
  std::array<uint16_t, 3> frame_head_end_{};
  uint16_t get_head_len_ = 0;
  uint8_t item_head_len_ = 0;
  QueueHolds queue_holds_;
  LazyForm partial_metadata_;
  LazyForm cbor_;
  LazyForm without_managed_fields_;  // Null form: the object has none.
};

using ObjectPtr = std::shared_ptr<const CachedObject>;

// Splices `rv` into an object's metadata.resourceVersion: the first "resourceVersion" member
// after "metadata":{ (Go encodes ObjectMeta with resourceVersion before labels and annotations,
// so it cannot be shadowed). Returns the new bytes, or an error if there is none.
absl::StatusOr<std::string> SpliceResourceVersion(std::string_view json, uint64_t rv);

// The same for an object's protobuf message: metadata (field 1) re-encoded with its
// resourceVersion (field 6) set to `rv`, and, when `add_annotation` is given, that annotation
// (field 12) added after the existing ones. Everything else is kept byte for byte.
absl::StatusOr<std::string> SpliceProtoMetadata(
    std::string_view message, uint64_t rv,
    const std::pair<std::string_view, std::string_view>* add_annotation = nullptr,
    std::string_view drop_annotation = {});

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_CACHED_OBJECT_H_
