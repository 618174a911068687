// libFuzzer target: kf::ParseJson under small limits (depth 64, 1 MiB), and GoJsonString: what it
// writes is always one JSON string; kf::JsonToCbor under the same limits takes exactly what
// ParseJson takes (with a []byte member, also base64 it refuses).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/api/cbor.h"
#include "common/api/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const kf::JsonLimits limits{.max_bytes = 1u << 20, .max_depth = 64};
  rapidjson::Document doc;
  if (kf::ParseJson(in, doc, limits).ok() && kf::JsonDepth(in, 1000) > limits.max_depth) {
    std::abort();  // Accepted a document deeper than the limit.
  }
  const bool parses = kf::ParseJson(in, doc, limits).ok();
  if (kf::JsonToCbor(in, {}, limits).ok() != parses) std::abort();
  if (kf::JsonToCbor(in, "data", limits).ok() && !parses) std::abort();
  rapidjson::Document str;
  if (!kf::ParseJson(kf::GoJsonString(in), str).ok() || !str.IsString()) std::abort();
  return 0;
}
