# libsoxr, linked statically into libkazetts when its source is given: the resampler of the
# native enrollment (kz_resample, kz_tts_enroll), the same library and build options as the
# python-soxr wheel the Python engine resamples with, so that both give the same samples.
#   KAZETTS_SOXR_SRC: the unpacked python-soxr sdist (it vendors libsoxr under libsoxr/; the
#     Makefile's soxr-src target fetches it), or empty: no libsoxr, and kz_resample refuses any
#     rate but 24000 (pip's build, which cannot download)
# Options as python-soxr 1.1.0's CMakeLists.txt sets them: no OpenMP, no libsamplerate
# bindings, no tests, static, position-independent; the SIMD and FFT choices are libsoxr's
# defaults (cr32s with pffft where SIMD is found), which the wheel keeps too.
set(KAZETTS_SOXR_SRC "" CACHE PATH "the unpacked python-soxr sdist (holding libsoxr/), or empty: no libsoxr")

function(kazetts_use_soxr target)
    if(KAZETTS_SOXR_SRC STREQUAL "")
        message(STATUS "kazetts: built without libsoxr (KAZETTS_SOXR_SRC empty): 24 kHz enrollment only")
        return()
    endif()
    if(NOT EXISTS "${KAZETTS_SOXR_SRC}/libsoxr/src/soxr.h")
        message(FATAL_ERROR "KAZETTS_SOXR_SRC must be the unpacked python-soxr sdist (no libsoxr/src/soxr.h in '${KAZETTS_SOXR_SRC}')")
    endif()
    set(BUILD_TESTS OFF)
    set(BUILD_EXAMPLES OFF)
    set(WITH_OPENMP OFF)
    set(WITH_LSR_BINDINGS OFF)
    set(BUILD_SHARED_LIBS OFF)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    set(CMAKE_POLICY_DEFAULT_CMP0077 NEW) # the variables above set libsoxr's options
    add_subdirectory("${KAZETTS_SOXR_SRC}/libsoxr" "${CMAKE_BINARY_DIR}/libsoxr" EXCLUDE_FROM_ALL)
    target_link_libraries(${target} PRIVATE soxr)
    # libsoxr's symbols stay inside libkazetts (beside python-soxr's own copy in one process)
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,libsoxr.a")
    target_include_directories(${target} SYSTEM PRIVATE "${KAZETTS_SOXR_SRC}/libsoxr/src")
    target_compile_definitions(${target} PRIVATE KZ_HAVE_SOXR=1)
    message(STATUS "kazetts: libsoxr from ${KAZETTS_SOXR_SRC}")
endfunction()
