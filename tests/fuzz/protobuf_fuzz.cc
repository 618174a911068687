// libFuzzer target: the protobuf readers of upstream bytes (common/api/kube_proto.h) and the object
// reader behind the protobuf cache (CachedObject::FromProtobuf, SpliceProtoMetadata). The
// input is tried as a LIST body, a watch frame's message and an object's message. What parses
// must stay inside the input, and an object that parses must splice and parse again with the
// same key.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cache/cached_object.h"
#include "common/api/kube_proto.h"
#include "common/api/upstream_list.h"

namespace {

bool Inside(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  kf::ProtoListPage page;
  if (kf::ParseProtoList(in, &page)) {
    for (std::string_view item : page.items) {
      if (!Inside(item, in)) std::abort();
    }
  }
  kf::ProtoWatchEvent event;
  if (kf::ParseProtoWatchEvent(in, &event)) {
    if (!Inside(event.object.raw, in) || !Inside(event.type, in)) std::abort();
    (void)kf::ProtoStatusCode(event.object.raw);
  }
  static const kf::ResourceType kPods{"", "v1", "pods", "Pod", true, false};
  auto obj = kf::CachedObject::FromProtobuf(kPods, std::string(in));
  if (obj.ok()) {
    const kf::ObjectPtr at = (*obj)->WithResourceVersion(42);
    if (at->key() != (*obj)->key()) std::abort();
    auto again = kf::CachedObject::FromProtobuf(kPods, std::string(at->bytes()));
    if (!again.ok() || (*again)->resource_version() != 42 || (*again)->key() != (*obj)->key()) {
      std::abort();
    }
  }
  return 0;
}
