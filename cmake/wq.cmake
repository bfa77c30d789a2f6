# Small helpers in the style of Abseil/TensorStore:
#   wq_cc_library(NAME x SRCS a.cc HDRS a.h DEPS y z)
#   wq_cc_test(NAME x_test SRCS x_test.cc DEPS x LABELS unit [TIMEOUT s] [MODEL])
#     MODEL: the test reads the real test model or texts (common/testing/test_paths.h),
#     so it requires the ctest fixture wq_test_model (tests/CMakeLists.txt).
#   wq_cc_binary(NAME x SRCS main.cc DEPS y)
# Targets are named wq_<NAME>; include paths are the repository root, so
# code includes "common/model/llama_config.h".

# Sanitizer builds (the asan and tsan presets) run the same work several times slower
# (common/transport/work_deadline.h's kSanitizerSlowdown): there every test's TIMEOUT
# (ctest's 1500 s where none is set) is scaled by WQ_TEST_TIMEOUT_SCALE, at the end of
# the directory that defines the test (the wq_cc_* helpers schedule it).
# They also hold more memory (TSan's shadow, ASan's redzones and quarantine): the script
# tests that hold a process to a memory bar (tests/scale_smoke_test.sh) scale it by
# WQ_TEST_MEMORY_SCALE (their environment's WQ_MEMORY_BAR_SCALE; measured: scale_cut's
# quantize peaked at 1325 MiB in the dev build, 3612 MiB under TSan).
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread")
  set(WQ_TEST_TIMEOUT_SCALE 10)
  set(WQ_TEST_MEMORY_SCALE 4)
elseif(CMAKE_CXX_FLAGS MATCHES "-fsanitize=address")
  set(WQ_TEST_TIMEOUT_SCALE 3)
  set(WQ_TEST_MEMORY_SCALE 3)
else()
  set(WQ_TEST_TIMEOUT_SCALE 1)
  set(WQ_TEST_MEMORY_SCALE 1)
endif()
function(wq_scale_test_timeouts)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} TIMEOUT timeout)
    if(NOT timeout)
      set(timeout 1500)
    endif()
    math(EXPR timeout "${timeout} * ${WQ_TEST_TIMEOUT_SCALE}")
    set_tests_properties(${t} PROPERTIES TIMEOUT ${timeout})
  endforeach()
endfunction()
function(wq_defer_test_timeout_scaling)
  get_property(deferred DIRECTORY PROPERTY WQ_TEST_TIMEOUTS_DEFERRED)
  if(NOT WQ_TEST_TIMEOUT_SCALE EQUAL 1 AND NOT deferred)
    set_property(DIRECTORY PROPERTY WQ_TEST_TIMEOUTS_DEFERRED TRUE)
    cmake_language(DEFER CALL wq_scale_test_timeouts)
  endif()
endfunction()

function(wq_cc_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  wq_defer_test_timeout_scaling()
  if(A_SRCS)
    add_library(wq_${A_NAME} STATIC ${A_SRCS} ${A_HDRS})
    target_include_directories(wq_${A_NAME} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(wq_${A_NAME} PUBLIC ${A_DEPS})
  else()
    add_library(wq_${A_NAME} INTERFACE)
    target_include_directories(wq_${A_NAME} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(wq_${A_NAME} INTERFACE ${A_DEPS})
  endif()
endfunction()

function(wq_cc_test)
  cmake_parse_arguments(A "MODEL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  wq_defer_test_timeout_scaling()
  add_executable(${A_NAME} ${A_SRCS})
  # Every test may use the StatusIs / IsOk matchers of common/testing.
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} wq_testing_status GTest::gmock GTest::gtest_main)
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_test(NAME ${A_NAME} COMMAND ${A_NAME})
  set_tests_properties(${A_NAME} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "WQ_SOURCE_DIR=${PROJECT_SOURCE_DIR};WQ_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(A_MODEL)
    set_tests_properties(${A_NAME} PROPERTIES FIXTURES_REQUIRED wq_test_model)
  endif()
endfunction()

function(wq_cc_binary)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  wq_defer_test_timeout_scaling()
  add_executable(${A_NAME} ${A_SRCS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
endfunction()
