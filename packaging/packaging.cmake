# What `cmake --install` lays out and what CPack packs (docs/install.md):
#   bin/matricxon                          the binary
#   share/doc/matricxon/                   README, CHANGELOG, LICENSE, docs/
#   etc/matricxon/matricxon.env            the service's settings, every line commented out
#                                          (/etc/matricxon for the prefix /usr)
#   lib/systemd/system/matricxon.service   the unit, its user (sysusers.d) and state folder (tmpfiles.d)
# `cpack -G DEB` in the build folder writes matricxon_<version>-1_<arch>.deb,
# its Depends computed from the binary's libraries by dpkg-shlibdeps.
include(GNUInstallDirs)

install(TARGETS matricxon RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES README.md CHANGELOG.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES packaging/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The unit and the settings file: their paths follow the prefix given at install time.
install(CODE "set(MX_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
set(MX_BINARY_DIR \"${CMAKE_BINARY_DIR}\")
set(MX_DOC_SUBDIR \"${CMAKE_INSTALL_DOCDIR}\")
include(\"${CMAKE_SOURCE_DIR}/packaging/install_service.cmake\")")
install(FILES packaging/matricxon.sysusers DESTINATION lib/sysusers.d RENAME matricxon.conf)
install(FILES packaging/matricxon.tmpfiles DESTINATION lib/tmpfiles.d RENAME matricxon.conf)

# ---- CPack: the Debian package ----
set(CPACK_PACKAGE_NAME matricxon)
set(CPACK_PACKAGE_VENDOR "The Matricxon authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference server with a prompt cache")
set(CPACK_PACKAGE_DESCRIPTION
    "Matricxon serves GGUF language models over an OpenAI-compatible HTTP API with its own
CPU engine. It keeps each chat's processed state (attention KV rows and recurrent
state) in a RAM pool and in encrypted saved caches on disk, so the next turn of a
chat reads only its new tokens. The package runs it as the matricxon service.")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(MATRICXON_PACKAGE_MAINTAINER "Matricxon maintainers <maintainers@matricxon.invalid>"
    CACHE STRING "the Maintainer field of the .deb")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${MATRICXON_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The libraries the binary links, found by dpkg-shlibdeps (dpkg-dev); passwd
# for useradd in postinst where there is no systemd-sysusers.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "curl")
# postinst/prerm/postrm, the conffile list, and copyright under the doc folder.
set(MX_DEB_CONTROL ${CMAKE_BINARY_DIR}/packaging/deb-control)
file(MAKE_DIRECTORY ${MX_DEB_CONTROL})
file(WRITE ${MX_DEB_CONTROL}/conffiles "/etc/matricxon/matricxon.env\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/postinst ${CMAKE_SOURCE_DIR}/packaging/debian/prerm
    ${CMAKE_SOURCE_DIR}/packaging/debian/postrm ${MX_DEB_CONTROL}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

# ---- tests of the install layout, the unit and the package ----
if(MATRICXON_TESTS)
  add_test(NAME systemd_unit
           COMMAND ${CMAKE_SOURCE_DIR}/packaging/tests/systemd_unit_test.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_BINARY_DIR}/packaging/systemd_unit)
  set_tests_properties(systemd_unit PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
  add_test(NAME dockerfile_lint
           COMMAND ${CMAKE_SOURCE_DIR}/packaging/tests/dockerfile_lint.sh ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/packaging/dockerfile_lint)
  set_tests_properties(dockerfile_lint PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  # The .deb, packed from this build, then installed and used in a clean
  # Debian root (root and the Debian mirror needed; MATRICXON_SKIP_CHROOT_TEST=1
  # skips it explicitly).
  execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE MX_DEB_ARCH
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(MX_DEB ${CMAKE_BINARY_DIR}/packages/matricxon_${PROJECT_VERSION}-1_${MX_DEB_ARCH}.deb)
  add_test(NAME deb_package
           COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
                   -B ${CMAKE_BINARY_DIR}/packages)
  set_tests_properties(deb_package PROPERTIES FIXTURES_SETUP deb TIMEOUT 300)
  add_test(NAME deb_chroot_install
           COMMAND ${CMAKE_SOURCE_DIR}/packaging/tests/deb_chroot_test.sh ${MX_DEB}
                   ${CMAKE_BINARY_DIR}/packaging/chroot)
  set_tests_properties(deb_chroot_install PROPERTIES FIXTURES_REQUIRED deb TIMEOUT 900
                       SKIP_RETURN_CODE 77)
endif()
