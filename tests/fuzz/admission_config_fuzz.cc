// libFuzzer target: kf::ratelimit::ParseConfig. Never throws; a valid configuration has its flow
// schemas sorted by matching precedence, each naming a priority level it defines.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ratelimit/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto config = kf::ratelimit::ParseConfig(in);
  if (!config.ok()) return 0;
  const auto& schemas = config->flow_schemas;
  for (size_t i = 1; i < schemas.size(); ++i) {
    if (schemas[i - 1].matching_precedence > schemas[i].matching_precedence) std::abort();
  }
  return 0;
}
