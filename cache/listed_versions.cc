#include "cache/listed_versions.h"

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "cache/cached_object.h"
#include "common/api/json.h"
#include "common/strings.h"
#include "rapidjson/document.h"

namespace kf {

absl::StatusOr<std::vector<Cacher::Listed>> ListedVersions(const ListPage& page) {
  std::vector<Cacher::Listed> listed;
  listed.reserve(page.items.size());
  for (std::string_view item : page.items) {
    rapidjson::Document doc;
    if (!ParseJson(item, doc).ok() || !doc.IsObject()) {
      return absl::InvalidArgumentError("list item is not a JSON object");
    }
    const auto meta = doc.FindMember("metadata");
    if (meta == doc.MemberEnd() || !meta->value.IsObject()) {
      return absl::InvalidArgumentError("list item without metadata");
    }
    const auto field = [&meta](const char* name) -> std::string_view {
      const auto it = meta->value.FindMember(name);
      if (it == meta->value.MemberEnd() || !it->value.IsString()) return {};
      return std::string_view(it->value.GetString(), it->value.GetStringLength());
    };
    uint64_t rv = 0;
    if (field("name").empty() || !absl::SimpleAtoi(ToAbsl(field("resourceVersion")), &rv)) {
      return absl::InvalidArgumentError("list item without name or resourceVersion");
    }
    listed.push_back({CachedObject::Key(field("namespace"), field("name")), rv});
  }
  return listed;
}

}  // namespace kf
