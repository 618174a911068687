# The selector library: label selectors, field selectors, per-resource selectable fields and
# shard selectors.
# Included from cache/CMakeLists.txt; kept separate while kf_cache is being built up.
add_library(kf_selectors STATIC
  ${CMAKE_CURRENT_LIST_DIR}/field_selector.cc
  ${CMAKE_CURRENT_LIST_DIR}/label_lexer.cc
  ${CMAKE_CURRENT_LIST_DIR}/label_selector.cc
  ${CMAKE_CURRENT_LIST_DIR}/labels.cc
  ${CMAKE_CURRENT_LIST_DIR}/selectable_fields.cc
  ${CMAKE_CURRENT_LIST_DIR}/shard_selector.cc
)
kf_unity(kf_selectors)
target_include_directories(kf_selectors PUBLIC ${PROJECT_SOURCE_DIR})
# RapidJSON is header-only and installed in a system include directory.
target_link_libraries(kf_selectors
  PUBLIC kf_common kf_api absl::status absl::statusor absl::strings
  PRIVATE kf_warnings)
