# Install rules: headers, both libraries and the interpose library, a CMake package, pkg-config files
# and the documents the manual pages cite. man/ installs the pages, and
# programs (uepoll-bench) add their own install(TARGETS) next to their
# definition. Included from the top-level CMakeLists.txt after src/.
include(CMakePackageConfigHelpers)

set(UEPOLL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/uepoll)

# libuepoll-interpose.so (uepoll::interpose) sits beside libuepoll.so: it is
# preloaded or linked first by name (README.md), so it has no namelink.
install(TARGETS uepoll uepoll_static uepoll_interpose
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

# pkg-config: uepoll.pc (the shared library; Libs.private for a static
# link) and uepoll-static.pc (the archive), written at install time by
# write_pkgconfig.cmake, when the prefix is known.
install(CODE "
  set(UEPOLL_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(UEPOLL_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(UEPOLL_PC_VERSION \"${PROJECT_VERSION}\")
  set(UEPOLL_PC_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  set(UEPOLL_PC_TEMPLATES \"${CMAKE_CURRENT_LIST_DIR}\")
  set(UEPOLL_PC_WORK \"${PROJECT_BINARY_DIR}/pkgconfig\")
  include(\"${CMAKE_CURRENT_LIST_DIR}/write_pkgconfig.cmake\")
  " COMPONENT development)

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
# The documents the manual pages point to.
install(FILES ${PROJECT_SOURCE_DIR}/docs/semantics.md
              ${PROJECT_SOURCE_DIR}/docs/contract.md
              ${PROJECT_SOURCE_DIR}/docs/cxx_api.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT development)
