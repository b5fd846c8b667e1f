# The Debian package of lock: `cpack --config CPackConfig.cmake` in the build tree writes
# lock_<version>-<release>_<arch>.deb. What `cmake --install` installs goes in under /usr; the
# Debian-only parts (compressed manual pages, copyright, changelog, examples) are added in the
# staging tree by deb-stage.cmake, so that `cmake --install` stays a plain install.

set(LOCK_PACKAGE_MAINTAINER "lock maintainers <maintainers@users.noreply.a-seed-5e796497.example>"
    CACHE STRING "Maintainer field of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME lock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "${LOCK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${LOCK_PACKAGE_MAINTAINER}")
# A Debian revision makes this a non-native package, whose changelog is changelog.Debian.gz; it
# must match the top entry of packaging/changelog (tests/packaging checks that).
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "run a command only while holding a lock or a semaphore slot")
# The extended description; CPack puts the summary above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "lock acquires a lock, or one slot of an N-slot semaphore, runs a command
while it holds it, and stops the command when the lock is lost. It accepts
the options of consul lock and works without any server: the default
backend keeps file locks on this machine, hands them out first come, first
served, and gives the command a fencing token for each acquisition. The
other backends keep the lock in Consul, etcd, ZooKeeper or PostgreSQL (an
advisory lock, which applications taking the same key respect).")

# Depends come from dpkg-shlibdeps on every dynamically linked ELF file in the package. lock
# itself is static and needs nothing; a dynamically linked companion (a network backend in
# ${CMAKE_INSTALL_LIBEXECDIR}/lock/) brings its libraries' packages in without any change here:
# lock-postgres, which loads the system's libpq, so brings in libpq5 (tests/packaging checks it).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
# Directories made while staging otherwise follow the umask of whoever runs cpack.
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/deb-stage.cmake)
# Read by deb-stage.cmake, which runs inside cpack and sees only CPACK_* variables.
set(CPACK_LOCK_SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
set(CPACK_LOCK_STRIP ${CMAKE_STRIP})

include(CPack)
