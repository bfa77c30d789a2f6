# Small helpers in the style of Abseil/TensorStore:
#   wq_cc_library(NAME x SRCS a.cc HDRS a.h DEPS y z)
#   wq_cc_test(NAME x_test SRCS x_test.cc DEPS x LABELS unit [TIMEOUT s] [MODEL])
#     MODEL: the test reads the real test model or texts (common/testing/test_paths.h),
#     so it requires the ctest fixture wq_test_model (tests/CMakeLists.txt).
#   wq_cc_binary(NAME x SRCS main.cc DEPS y)
# Targets are named wq_<NAME>; include paths are the repository root, so
# code includes "common/model/llama_config.h".

function(wq_cc_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
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
  add_executable(${A_NAME} ${A_SRCS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
endfunction()
