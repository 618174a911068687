// libFuzzer target: kf::ParseWatchLine. A line that parses has a type, and its object is a view
// into the line holding one JSON object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/api/json.h"
#include "common/api/upstream_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto line = kf::ParseWatchLine(in);
  if (!line.ok()) return 0;
  if (line->object.data() < in.data() ||
      line->object.data() + line->object.size() > in.data() + in.size()) {
    std::abort();
  }
  rapidjson::Document object;
  if (!kf::ParseJson(line->object, object).ok() || !object.IsObject()) std::abort();
  return 0;
}
