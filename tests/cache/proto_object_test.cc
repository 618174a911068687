// Protobuf from the cache, checked against bytes the real kube-apiserver v1.36.3 sent (captured
// with curl from the test rig's apiserver: a ConfigMap GET, a
// LIST with limit=1, and a WatchList stream with an ADDED, the initial-events-end bookmark, an
// ADDED, a DELETED and a bookmark). kube-fanout must rebuild each byte for byte from the
// objects' messages.
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/escaping.h"
#include "cache/cached_object.h"
#include "cache/cacher.h"
#include "cache/snapshot.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/api/upstream_list.h"
#include "common/strings.h"
#include "tests/cache/fuzz_seed.h"

namespace kf {
namespace {

std::string Hex(std::string_view hex) { return absl::HexStringToBytes(ToAbsl(hex)); }

const std::string kGet = Hex(
    "6b3873000a0f0a0276311209436f6e6669674d617012a2010a97010a016112001a02706222002a2438323636383065"
    "62"
    "2d386432352d343132662d623230632d6366653766633762363231313203323133380042080889dc92d80610008a01"
    "52"
    "0a0e6b75626563746c2d63726561746512065570646174651a02763122080889dc92d806100032084669656c647356"
    "31"
    "3a1e0a1c7b22663a64617461223a7b222e223a7b7d2c22663a78223a7b7d7d7d420012060a01781201311a002200");

const std::string kList =
    Hex("6b3873000a130a027631120d436f6e6669674d61704c69737412b0010a090a0012033231351a0012a2010a9701"
        "0a0161"
        "12001a02706222002a2438323636383065622d386432352d343132662d623230632d6366653766633762363231"
        "313203"
        "323133380042080889dc92d80610008a01520a0e6b75626563746c2d63726561746512065570646174651a0276"
        "312208"
        "0889dc92d806100032084669656c647356313a1e0a1c7b22663a64617461223a7b222e223a7b7d2c22663a7822"
        "3a7b7d"
        "7d7d420012060a01781201311a002200");

const std::string kWatch =
    Hex("000000cb0a05414444454412c1010abe016b3873000a0f0a0276311209436f6e6669674d617012a2010a97010a"
        "016112"
        "001a02706222002a2438323636383065622d386432352d343132662d623230632d636665376663376236323131"
        "320332"
        "3133380042080889dc92d80610008a01520a0e6b75626563746c2d63726561746512065570646174651a027631"
        "220808"
        "89dc92d806100032084669656c647356313a1e0a1c7b22663a64617461223a7b222e223a7b7d2c22663a78223a"
        "7b7d7d"
        "7d420012060a01781201311a002200000000610a08424f4f4b4d41524b12550a536b3873000a0f0a0276311209"
        "436f6e"
        "6669674d617012380a360a0012001a0022002a0032033231353800420062210a196b38732e696f2f696e697469"
        "616c2d"
        "6576656e74732d656e641204747275651a002200000000cb0a05414444454412c1010abe016b3873000a0f0a02"
        "763112"
        "09436f6e6669674d617012a2010a97010a016212001a02706222002a2436373035343730662d316531622d3462"
        "39362d"
        "613063632d3936353832316232376334343203323136380042080896dc92d80610008a01520a0e6b7562656374"
        "6c2d63"
        "726561746512065570646174651a02763122080896dc92d806100032084669656c647356313a1e0a1c7b22663a"
        "646174"
        "61223a7b222e223a7b7d2c22663a79223a7b7d7d7d420012060a01791201321a002200000000cd0a0744454c45"
        "544544"
        "12c1010abe016b3873000a0f0a0276311209436f6e6669674d617012a2010a97010a016212001a02706222002a"
        "243637"
        "3035343730662d316531622d346239362d613063632d3936353832316232376334343203323137380042080896"
        "dc92d8"
        "0610008a01520a0e6b75626563746c2d63726561746512065570646174651a02763122080896dc92d806100032"
        "084669"
        "656c647356313a1e0a1c7b22663a64617461223a7b222e223a7b7d2c22663a79223a7b7d7d7d420012060a0179"
        "120132"
        "1a0022000000003e0a08424f4f4b4d41524b12320a306b3873000a0f0a0276311209436f6e6669674d61701215"
        "0a130a"
        "0012001a0022002a003203323137380042001a002200");

const ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap", true, false};

std::vector<std::string> Frames(std::string_view stream) {
  std::vector<std::string> out;
  while (stream.size() >= 4) {
    const auto* b = reinterpret_cast<const unsigned char*>(stream.data());
    const size_t len = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
    REQUIRE(stream.size() >= 4 + len);
    out.emplace_back(stream.substr(0, 4 + len));
    stream.remove_prefix(4 + len);
  }
  REQUIRE(stream.empty());
  return out;
}

std::string Joined(const std::vector<Piece>& pieces) {
  std::string out;
  for (const Piece& p : pieces) out.append(p.bytes);
  return out;
}

TEST_CASE("A protobuf object answers a GET with the apiserver's bytes") {
  UnknownView u;
  REQUIRE(ParseUnknown(kGet, &u));
  CHECK(u.api_version == "v1");
  CHECK(u.kind == "ConfigMap");
  auto obj = CachedObject::FromProtobuf(kConfigMaps, std::string(u.raw));
  REQUIRE(obj.ok());
  CHECK((*obj)->key() == "pb/a");
  CHECK((*obj)->resource_version() == 213);
  REQUIRE((*obj)->fields().Get("metadata.namespace") != nullptr);
  CHECK(*(*obj)->fields().Get("metadata.namespace") == "pb");
  const std::string get = std::string((*obj)->proto_get_head()) + std::string((*obj)->bytes()) +
                          std::string(kUnknownTail);
  CHECK(get == kGet);
}

// kube-apiserver v1.36.3's GET of one ConfigMap in protobuf, whole and with
// `Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
const std::string kFullGet = Hex(
    "6b3873000a0f0a0276311209436f6e6669674d617012a4010a99010a02706d12001a026d6422002a243832323964"
    "3838652d393834382d346436312d616636352d6363396638323062396666383204323235343800420808c395add8"
    "0610008a01520a0e6b75626563746c2d63726561746512065570646174651a027631220808c395add80610003208"
    "4669656c647356313a1e0a1c7b22663a64617461223a7b222e223a7b7d2c22663a6b223a7b7d7d7d420012060a01"
    "6b1201761a002200");
const std::string kPartialMetadataGet = Hex(
    "6b3873000a270a0e6d6574612e6b38732e696f2f763112155061727469616c4f626a6563744d6574616461746112"
    "9c010a99010a02706d12001a026d6422002a2438323239643838652d393834382d346436312d616636352d636339"
    "6638323062396666383204323235343800420808c395add80610008a01520a0e6b75626563746c2d637265617465"
    "12065570646174651a027631220808c395add806100032084669656c647356313a1e0a1c7b22663a64617461223a"
    "7b222e223a7b7d2c22663a6b223a7b7d7d7d42001a002200");

TEST_CASE("A protobuf object's PartialObjectMetadata form is the apiserver's") {
  UnknownView u;
  REQUIRE(ParseUnknown(kFullGet, &u));
  auto obj = CachedObject::FromProtobuf(kConfigMaps, std::string(u.raw));
  REQUIRE(obj.ok());
  const ObjectPtr& form = (*obj)->PartialMetadata();
  CHECK(form->key() == (*obj)->key());
  CHECK(std::string(form->proto_get_head()) + std::string(form->bytes()) +
            std::string(kUnknownTail) ==
        kPartialMetadataGet);
}

TEST_CASE("A protobuf LIST is parsed and rebuilt from its items' messages") {
  ProtoListPage page;
  REQUIRE(ParseProtoList(kList, &page));
  CHECK(page.kind == "ConfigMapList");
  CHECK(page.resource_version == 215);
  REQUIRE(page.items.size() == 1);
  auto obj = CachedObject::FromProtobuf(kConfigMaps, std::string(page.items[0]));
  REQUIRE(obj.ok());
  std::string meta;
  AppendBytesField(&meta, 1, EncodeListMeta("215", "", std::nullopt));
  const std::string items = std::string((*obj)->proto_item_head()) + std::string((*obj)->bytes());
  const std::string rebuilt = UnknownHead("v1", "ConfigMapList", meta.size() + items.size()) +
                              meta + items + std::string(kUnknownTail);
  CHECK(rebuilt == kList);
}

TEST_CASE("Protobuf watch frames and bookmarks are the apiserver's") {
  const std::vector<std::string> frames = Frames(kWatch);
  REQUIRE(frames.size() == 5);
  std::vector<ProtoWatchEvent> events(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    REQUIRE(ParseProtoWatchEvent(std::string_view(frames[i]).substr(4), &events[i]));
  }
  CHECK(events[0].type == "ADDED");
  CHECK(events[1].type == "BOOKMARK");
  CHECK(events[2].type == "ADDED");
  CHECK(events[3].type == "DELETED");
  CHECK(events[4].type == "BOOKMARK");

  // Object events: the object's frame head, its message, the envelope's tail.
  auto a = CachedObject::FromProtobuf(kConfigMaps, std::string(events[0].object.raw));
  auto b = CachedObject::FromProtobuf(kConfigMaps, std::string(events[2].object.raw));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<Piece> pieces;
  AppendFrame("ADDED", *a, &pieces);
  CHECK(Joined(pieces) == frames[0]);
  pieces.clear();
  AppendFrame("ADDED", *b, &pieces);
  CHECK(Joined(pieces) == frames[2]);
  // The DELETED object is the last state with the deletion's RV: spliced, not re-read.
  const ObjectPtr deleted = (*b)->WithResourceVersion(217);
  CHECK(deleted->resource_version() == 217);
  CHECK(deleted->key() == "pb/b");
  pieces.clear();
  AppendFrame("DELETED", deleted, &pieces);
  CHECK(Joined(pieces) == frames[3]);

  // Bookmarks from the template the reflector keeps (the end marker removed).
  auto tmpl = SpliceProtoMetadata(events[1].object.raw, 0, nullptr, "k8s.io/initial-events-end");
  REQUIRE(tmpl.ok());
  Cacher cacher(
      kConfigMaps, EventRingLimits{}, [] { return std::chrono::steady_clock::now(); },
      Encoding::kProtobuf);
  cacher.SetBookmarkTemplate(*tmpl);
  CHECK(*cacher.BookmarkFrame(215, /*initial_events_end=*/true) == frames[1]);
  CHECK(*cacher.BookmarkFrame(217) == frames[4]);
}

TEST_CASE("A protobuf cache lists and watches in protobuf") {
  Cacher cacher(
      kConfigMaps, EventRingLimits{}, [] { return std::chrono::steady_clock::now(); },
      Encoding::kProtobuf);
  UnknownView u;
  REQUIRE(ParseUnknown(kGet, &u));
  auto a = CachedObject::FromProtobuf(kConfigMaps, std::string(u.raw));
  REQUIRE(a.ok());
  cacher.Replace({*a}, 215);
  REQUIRE(cacher.synced());
  auto w = cacher.Watch(
      Cacher::WatchRequest{WatchFilter{}, Cacher::Start::kInitialState, 0, 1 << 20, [] {}});
  REQUIRE(w.ok());
  const std::string initial = Joined((*w)->Take().pieces);
  const std::vector<std::string> frames = Frames(kWatch);
  CHECK(initial == frames[0]);  // The initial state's ADDED, as the apiserver sent it.
}

TEST_CASE("A protobuf cache's snapshot restores its objects and window byte for byte") {
  const std::vector<std::string> frames = Frames(kWatch);
  std::vector<ProtoWatchEvent> events(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    REQUIRE(ParseProtoWatchEvent(std::string_view(frames[i]).substr(4), &events[i]));
  }
  auto a = CachedObject::FromProtobuf(kConfigMaps, std::string(events[0].object.raw));
  auto b = CachedObject::FromProtobuf(kConfigMaps, std::string(events[2].object.raw));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto tmpl = SpliceProtoMetadata(events[1].object.raw, 0, nullptr, "k8s.io/initial-events-end");
  REQUIRE(tmpl.ok());
  auto new_cacher = [] {
    return std::make_unique<Cacher>(
        kConfigMaps, EventRingLimits{}, [] { return std::chrono::steady_clock::now(); },
        Encoding::kProtobuf);
  };
  auto original = new_cacher();
  original->SetBookmarkTemplate(*tmpl);
  original->Replace({*a}, 215);
  original->Apply(EventType::kAdded, *b);  // RV 216.
  original->Apply(EventType::kDeleted, (*b)->WithResourceVersion(217));
  auto state = original->ExportState();
  REQUIRE(state.has_value());
  REQUIRE(state->events.size() == 2);

  const SnapshotHeader header{"https://127.0.0.1:6443", 1700000000, kConfigMaps,
                              Encoding::kProtobuf};
  auto bytes = EncodeSnapshot(header, *state, 1 << 20);
  REQUIRE(bytes.ok());
  testing::CheckFuzzSeed("snapshot_fuzz", "configmaps_protobuf", *bytes);  // Its seed.
  auto decoded = DecodeSnapshot(*bytes);
  REQUIRE(decoded.ok());
  CHECK(decoded->header.encoding == Encoding::kProtobuf);
  auto restored_state = SnapshotToState(*decoded);
  REQUIRE(restored_state.ok());
  auto restored = new_cacher();
  REQUIRE(restored->ImportState(*std::move(restored_state)).ok());
  REQUIRE(restored->synced());
  CHECK(restored->resource_version() == 217);

  // A client resuming from 215 gets the window's ADDED and DELETED frames, as from the
  // original, and they are the apiserver's bytes.
  auto watch_bytes = [](Cacher& c) {
    auto w = c.Watch(
        Cacher::WatchRequest{WatchFilter{}, Cacher::Start::kAfterVersion, 215, 1 << 20, [] {}});
    REQUIRE(w.ok());
    std::string out = Joined((*w)->Take().pieces);
    c.RemoveWatcher(w->get());
    return out;
  };
  const std::string want = watch_bytes(*original);
  CHECK(want == frames[2] + frames[3]);
  CHECK(watch_bytes(*restored) == want);
  CHECK(*restored->BookmarkFrame(217) == frames[4]);

  // The same bytes read as JSON are another resource's snapshot: objects that do not parse.
  decoded->header.encoding = Encoding::kJson;
  CHECK_FALSE(SnapshotToState(*std::move(decoded)).ok());
}

TEST_CASE("Protobuf readers refuse malformed input") {
  ProtoListPage page;
  CHECK_FALSE(ParseProtoList("", &page));
  CHECK_FALSE(ParseProtoList(kList.substr(0, kList.size() - 10), &page));
  CHECK_FALSE(ParseProtoList(std::string("k8s\0\x0a\xff\xff\xff\xff\x0f", 10), &page));
  ProtoWatchEvent ev;
  CHECK_FALSE(
      ParseProtoWatchEvent("\x0a\x05"
                           "ADD",
                           &ev));
  CHECK_FALSE(CachedObject::FromProtobuf(kConfigMaps, "\x0a\x03\x32\x01").ok());
  CHECK_FALSE(CachedObject::FromProtobuf(kConfigMaps, "").ok());
  // A group (wire types 3 and 4) is nothing Kubernetes writes.
  ProtoReader r(std::string_view("\x0b\x0c", 2));
  ProtoField f;
  CHECK_FALSE(r.Next(&f));
  CHECK_FALSE(r.ok());
}

TEST_CASE("Selectable fields read from protobuf match those read from JSON") {
  for (const auto& [group, resource] : std::vector<std::pair<std::string, std::string>>{
           {"", "pods"},
           {"", "nodes"},
           {"", "events"},
           {"events.k8s.io", "events"},
           {"batch", "jobs"},
           {"", "secrets"},
           {"", "services"},
           {"", "namespaces"},
           {"", "replicationcontrollers"},
           {"certificates.k8s.io", "certificatesigningrequests"},
           {"resource.k8s.io", "resourceslices"},
           {"apps", "deployments"}}) {
    INFO(group << "/" << resource);
    CHECK(SelectableFields::ForResource(group, resource).ProtoPathsKnown());
  }
  // A pod: spec{serviceAccountName 8, nodeName 10, hostNetwork 11}, status{phase 1,
  // podIPs[0].ip 12.1}, in metadata name and namespace.
  std::string meta, spec, status, podip, pod;
  AppendBytesField(&meta, 1, "p");
  AppendBytesField(&meta, 3, "ns");
  AppendBytesField(&meta, 6, "7");
  AppendBytesField(&spec, 8, "sa");
  AppendBytesField(&spec, 10, "node-1");
  AppendVarintField(&spec, 11, 1);
  AppendBytesField(&status, 1, "Running");
  AppendBytesField(&podip, 1, "10.0.0.7");
  AppendBytesField(&status, 12, podip);
  AppendBytesField(&pod, 1, meta);
  AppendBytesField(&pod, 2, spec);
  AppendBytesField(&pod, 3, status);
  const FieldSet f = SelectableFields::ForResource("", "pods").ExtractProto(pod);
  auto get = [&f](std::string_view k) { return f.Get(k) ? *f.Get(k) : std::string("<absent>"); };
  CHECK(get("metadata.name") == "p");
  CHECK(get("metadata.namespace") == "ns");
  CHECK(get("spec.nodeName") == "node-1");
  CHECK(get("spec.serviceAccountName") == "sa");
  CHECK(get("spec.hostNetwork") == "true");
  CHECK(get("spec.restartPolicy") == "");
  CHECK(get("status.phase") == "Running");
  CHECK(get("status.podIP") == "10.0.0.7");  // From podIPs[0] when podIP is empty.
}

}  // namespace
}  // namespace kf
