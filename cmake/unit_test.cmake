# Tests beside the library they test (docs/design.md, "Tests"): each links only
# what it needs, so a change to one library rebuilds and reruns its own tests
# without waiting for a binary.
include(GoogleTest)

# The test helpers that need no binary: the source tree, models, scratch
# directories, whole-file reads and writes (tests/test_util.h; Shell and
# VerityBin are verity_test_util's, in tests/).
add_library(verity_test_files STATIC ${CMAKE_SOURCE_DIR}/tests/test_files.cc)
target_include_directories(verity_test_files PUBLIC ${CMAKE_SOURCE_DIR})
target_compile_definitions(verity_test_files PUBLIC VERITY_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# verity_unit_test(name [DIR subfolder] LIBS libs...): name.cc in this folder
# (or its subfolder), linked with libs and GoogleTest's main only.
function(verity_unit_test name)
  cmake_parse_arguments(T "" "DIR" "LIBS" ${ARGN})
  set(src ${name}.cc)
  if(T_DIR)
    set(src ${T_DIR}/${name}.cc)
  endif()
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
endfunction()

# The same for a test of the ledger side: the link guard checks it never
# reaches the engine, and ledger_product builds it.
function(verity_ledger_unit_test name)
  verity_unit_test(${name} ${ARGN})
  set_property(GLOBAL APPEND PROPERTY VERITY_LEDGER_TESTS ${name})
endfunction()
