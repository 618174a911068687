// libFuzzer target: kf::ParseListPage. Items are views into the body; an item that is an object
// stays one JSON object in event form.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/api/json.h"
#include "common/api/upstream_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto page = kf::ParseListPage(in);
  if (!page.ok()) return 0;
  const std::string kind = page->kind.substr(0, page->kind.size() - 4);  // As the reflector.
  for (std::string_view item : page->items) {
    if (item.data() < in.data() || item.data() + item.size() > in.data() + in.size()) {
      std::abort();
    }
    rapidjson::Document doc;
    if (!kf::ParseJson(item, doc).ok()) std::abort();
    if (!doc.IsObject()) continue;
    rapidjson::Document event;
    if (!kf::ParseJson(kf::ItemToEventForm(item, kind, page->api_version), event).ok() ||
        !event.IsObject()) {
      std::abort();
    }
  }
  return 0;
}
