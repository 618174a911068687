# Unit tests of the selector library (cache/selectors.cmake). Included from tests/CMakeLists.txt.
add_executable(kf_selector_tests
  ${CMAKE_CURRENT_LIST_DIR}/field_selector_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/label_selector_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/selectable_fields_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/shard_selector_test.cc
)
target_link_libraries(kf_selector_tests PRIVATE kf_selectors kf_warnings kf_test_main)
kf_unity(kf_selector_tests)
catch_discover_tests(kf_selector_tests EXTRA_ARGS -w NoTests)
