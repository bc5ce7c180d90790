# Run by `cmake --install` (and by CPack): installs the settings file and the
# unit, whose paths depend on the prefix given at install time, not at
# configure time: ExecStart names <prefix>/bin/matricxon, and the settings
# live in /etc for the prefix /usr (a package), in <prefix>/etc otherwise
# (GNUInstallDirs' rule). file(INSTALL) adds DESTDIR and records the files.
# In: MX_SOURCE_DIR, MX_BINARY_DIR, MX_DOC_SUBDIR (relative, e.g. share/doc/matricxon).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(mx_etc /etc/matricxon)
else()
  set(mx_etc ${CMAKE_INSTALL_PREFIX}/etc/matricxon)
endif()
set(MX_BIN_DIR ${CMAKE_INSTALL_PREFIX}/bin)
set(MX_DOC_DIR ${CMAKE_INSTALL_PREFIX}/${MX_DOC_SUBDIR})
set(MX_CONFIG_FILE ${mx_etc}/matricxon.env)
# One folder per destination: installs to two places may run at once (ctest -j).
string(MD5 mx_dest "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(mx_unit ${MX_BINARY_DIR}/packaging/install/${mx_dest}/matricxon.service)
configure_file(${MX_SOURCE_DIR}/packaging/matricxon.service.in ${mx_unit} @ONLY)
file(INSTALL ${mx_unit} DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
# Secrets (the admin token, the cache passphrase) go in this file: root's alone.
file(INSTALL ${MX_SOURCE_DIR}/packaging/matricxon.env DESTINATION ${mx_etc}
     PERMISSIONS OWNER_READ OWNER_WRITE)
