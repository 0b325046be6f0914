# The ggml that libkazetts links: llama-cpp-python's, so that a process holds one ggml.
#   default (pip's build backend, the Makefile): the llama-cpp-python installed for the build's
#     Python (Python3_EXECUTABLE; scikit-build-core passes its own), found by llama_cpp_python.py
#   GGML_LIB_DIR and GGML_INCLUDE_DIR given: those (cross builds, native/tests/golden_check)
# Sets GGML_INCLUDE_DIR, GGML_LIB_DIR, KZ_GGML_LIBS and KZ_BUILT_WITH (the ggml build libkazetts
# records, compared at load by kazetts.native), and defines kazetts_use_ggml(target).
set(GGML_INCLUDE_DIR "" CACHE PATH "ggml headers (empty: those of the Python's llama-cpp-python)")
set(GGML_LIB_DIR "" CACHE PATH "directory of libggml*.so (empty: llama_cpp/lib of the Python's llama-cpp-python)")

if(GGML_LIB_DIR STREQUAL "")
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
    execute_process(COMMAND "${Python3_EXECUTABLE}" "${CMAKE_CURRENT_LIST_DIR}/llama_cpp_python.py"
        OUTPUT_VARIABLE KZ_PROBE ERROR_VARIABLE KZ_PROBE_ERROR RESULT_VARIABLE KZ_PROBE_RESULT)
    if(NOT KZ_PROBE_RESULT EQUAL 0)
        message(FATAL_ERROR "${KZ_PROBE_ERROR}")
    endif()
    cmake_language(EVAL CODE "${KZ_PROBE}")
    message(STATUS "kazetts: ggml of ${KZ_BUILT_WITH} in ${GGML_LIB_DIR}")
else()
    set(KZ_BUILT_WITH "unknown (GGML_LIB_DIR=${GGML_LIB_DIR})")
endif()

if(NOT EXISTS "${GGML_INCLUDE_DIR}/ggml.h")
    message(FATAL_ERROR "GGML_INCLUDE_DIR must hold ggml.h (got '${GGML_INCLUDE_DIR}')")
endif()
set(KZ_GGML_LIBS "")
foreach(lib ggml ggml-base ggml-cpu)
    find_library(KZ_LIB_${lib} NAMES ${lib} PATHS "${GGML_LIB_DIR}" NO_DEFAULT_PATH NO_CACHE REQUIRED)
    list(APPEND KZ_GGML_LIBS "${KZ_LIB_${lib}}")
endforeach()

# Compiles `target` against the ggml headers and links it to ggml (by soname). In the build tree
# it runs against GGML_LIB_DIR; installed in site-packages/kazetts/lib, it finds ggml in the
# llama_cpp/lib beside it and the other kazetts libraries in its own directory.
function(kazetts_use_ggml target)
    target_include_directories(${target} PRIVATE "${GGML_INCLUDE_DIR}")
    target_link_libraries(${target} PRIVATE ${KZ_GGML_LIBS})
    set_target_properties(${target} PROPERTIES
        BUILD_RPATH "${GGML_LIB_DIR}"
        INSTALL_RPATH "$ORIGIN;$ORIGIN/../../llama_cpp/lib")
endfunction()
