# Installs BUILD_DIR into a fresh PREFIX, checks that bin/ holds pkserve, pkserve-cli,
# pkserve-bench and pk-golden, and runs PREFIX/bin/pkserve --help (exit 0, its usage text).
# Run by ctest (tests/install/CMakeLists.txt) with -DBUILD_DIR=... -DPREFIX=... -P.
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
                RESULT_VARIABLE installed OUTPUT_VARIABLE install_log ERROR_VARIABLE install_log)
if(NOT installed EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${installed}):\n"
                      "${install_log}")
endif()
foreach(binary pkserve pkserve-cli pkserve-bench pk-golden)
  if(NOT EXISTS "${PREFIX}/bin/${binary}")
    message(FATAL_ERROR "${PREFIX}/bin/${binary} was not installed:\n${install_log}")
  endif()
endforeach()
execute_process(COMMAND "${PREFIX}/bin/pkserve" --help
                RESULT_VARIABLE help_exit OUTPUT_VARIABLE help ERROR_VARIABLE help)
if(NOT help_exit EQUAL 0 OR NOT help MATCHES "Usage: pkserve")
  message(FATAL_ERROR "${PREFIX}/bin/pkserve --help exited ${help_exit}:\n${help}")
endif()
file(REMOVE_RECURSE "${PREFIX}")
message(STATUS "installed and ran ${PREFIX}/bin/pkserve --help")
