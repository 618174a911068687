// libFuzzer target: kf::RequestInfo::Parse. Input: "METHOD\nTARGET" (no newline: all target).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/api/request_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view method = nl == std::string_view::npos ? "GET" : in.substr(0, nl);
  const std::string_view target = nl == std::string_view::npos ? in : in.substr(nl + 1);
  auto info = kf::RequestInfo::Parse(method, target);
  if (!info.ok()) return 0;
  // A non-resource request's verb is the lower-cased method (a resource request with a method
  // the apiserver does not map, e.g. "P1OST", has none, as in requestinfo.go).
  if (!info->is_resource_request && !method.empty() && info->verb.empty()) std::abort();
  (void)info->GroupResource();
  (void)info->IsEventCreation();
  return 0;
}
