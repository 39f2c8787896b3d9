# A Debian package of the install tree: `cpack -G DEB` in a build directory
# gives uepoll_<version>_<arch>.deb with the libraries, headers, CMake and
# pkg-config files, manual pages and uepoll-bench (when it is built).
# Included from the top-level CMakeLists.txt after the install rules.
#
# Configure the build with -DCMAKE_INSTALL_PREFIX=/usr: the package
# installs where the build's install rules say, and GNUInstallDirs then
# gives Debian's multiarch libdir (lib/x86_64-linux-gnu). .ci/run builds the
# package that way from a fresh build directory and installs it
# (tests/consumer/deb_test.sh).
set(CPACK_PACKAGE_NAME uepoll)
set(CPACK_PACKAGE_VENDOR uepoll)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "uepoll developers <uepoll@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
# Only binary packages: a source package would sweep up build trees.
set(CPACK_SOURCE_GENERATOR "")

# The install rules write files whose contents name the prefix (the
# pkg-config files), so they must run with the real prefix and have the
# staging directory added as DESTDIR, not folded into the prefix.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# The long description; CPack puts the summary line above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"uepoll provides epoll instances, eventfds, pipes and AF_UNIX stream socket
pairs whose descriptors, readiness and wakeups are handled in user space,
with the Linux kernel's semantics. C API (uepoll/uepoll.h), C++20 API
(uepoll/uepoll.hpp), shared and static libraries, CMake and pkg-config
files, manual pages, and the uepoll-bench benchmark.")
# Depends: from the libraries the binaries link (dpkg-shlibdeps, in
# dpkg-dev; CPack also needs `file`).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)

include(CPack)
