# Install-time script (install(CODE) in install.cmake): writes uepoll.pc and
# uepoll-static.pc for the prefix being installed into and installs them.
# At configure time the prefix is not known yet (`cmake --install --prefix`
# and CPack choose it later); writing the files here gives plain absolute
# paths (prefix=/usr, includedir=${prefix}/include) instead of paths
# relative to the .pc file's directory (.../lib/pkgconfig/../../include).
#
# Inputs: UEPOLL_PC_LIBDIR and UEPOLL_PC_INCLUDEDIR (CMAKE_INSTALL_LIBDIR and
# _INCLUDEDIR as configured), UEPOLL_PC_VERSION, UEPOLL_PC_DESCRIPTION,
# UEPOLL_PC_TEMPLATES (this directory), UEPOLL_PC_WORK (a scratch directory).
get_filename_component(UEPOLL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}" ABSOLUTE)
foreach(_dir IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${UEPOLL_PC_${_dir}}")
    set(_abs_${_dir} "${UEPOLL_PC_${_dir}}")
  else()
    set(_abs_${_dir} "${UEPOLL_PC_PREFIX}/${UEPOLL_PC_${_dir}}")
    set(UEPOLL_PC_${_dir} "\${prefix}/${UEPOLL_PC_${_dir}}")
  endif()
endforeach()

foreach(_pc IN ITEMS uepoll uepoll-static)
  configure_file(${UEPOLL_PC_TEMPLATES}/${_pc}.pc.in
                 ${UEPOLL_PC_WORK}/${_pc}.pc @ONLY)
endforeach()
# file(INSTALL) is what install() rules run: it honours DESTDIR and records
# the files in install_manifest.txt.
file(INSTALL DESTINATION "${_abs_LIBDIR}/pkgconfig" TYPE FILE
     FILES ${UEPOLL_PC_WORK}/uepoll.pc ${UEPOLL_PC_WORK}/uepoll-static.pc)
