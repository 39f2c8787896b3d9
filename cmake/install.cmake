# Install rules: headers, both libraries, a CMake package and a pkg-config
# file. Programs (uepoll-bench) add their own install(TARGETS) next to their
# definition. Included from the top-level CMakeLists.txt after src/.
include(CMakePackageConfigHelpers)

set(UEPOLL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/uepoll)

install(TARGETS uepoll uepoll_static
  EXPORT uepoll-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          COMPONENT runtime NAMELINK_COMPONENT development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# Every public header, C and C++; nothing else lives in include/uepoll.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/uepoll
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

install(EXPORT uepoll-targets
  NAMESPACE uepoll::
  FILE uepollTargets.cmake
  DESTINATION ${UEPOLL_CMAKE_DIR} COMPONENT development)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/uepollConfig.cmake.in
  ${PROJECT_BINARY_DIR}/uepollConfig.cmake
  INSTALL_DESTINATION ${UEPOLL_CMAKE_DIR})
# Matches the soname rule in src/CMakeLists.txt: before 1.0 a minor release
# may break compatibility, so 0.1 does not satisfy a request for 0.2 or the
# reverse.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_uepoll_compat SameMinorVersion)
else()
  set(_uepoll_compat SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/uepollConfigVersion.cmake
  COMPATIBILITY ${_uepoll_compat})
install(FILES ${PROJECT_BINARY_DIR}/uepollConfig.cmake
              ${PROJECT_BINARY_DIR}/uepollConfigVersion.cmake
  DESTINATION ${UEPOLL_CMAKE_DIR} COMPONENT development)

# uepoll.pc locates the prefix relative to itself (${pcfiledir}), because
# `cmake --install --prefix` picks the prefix after configure_file has run.
# An absolute libdir cannot move, and then the prefix is written as is.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(UEPOLL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _uepoll_up /r/${CMAKE_INSTALL_LIBDIR}/pkgconfig /r)
  string(REGEX REPLACE "/$" "" _uepoll_up "${_uepoll_up}")
  set(UEPOLL_PC_PREFIX "\${pcfiledir}/${_uepoll_up}")
endif()
foreach(_dir IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(UEPOLL_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(UEPOLL_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/uepoll.pc.in
               ${PROJECT_BINARY_DIR}/uepoll.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/uepoll.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
