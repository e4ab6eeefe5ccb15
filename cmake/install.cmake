# What `cmake --install` and `cpack -G DEB` ship: the static kache, its manual page (generated from the
# binary's own tables, cmake/man.cmake), shell completion, and lib/kache/, a directory of links named
# like the compilers kache fronts: put it first on PATH and every compile goes through kache, which runs
# the real compiler found further along PATH (src/main.cpp: a link is never taken for the compiler).
include(GNUInstallDirs)

install(PROGRAMS $<TARGET_FILE:${kache_installed_target}> DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME kache)
# Remote execution's gRPC side, which kache runs from its own directory (docs/remote-execution.md).
if(TARGET kache-reapi)
  install(PROGRAMS $<TARGET_FILE:kache-reapi> DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

option(KACHE_MAN "Generate and install the manual page (needs help2man)" ON)
# help2man brings perl (47 MB), which scripts/setup.sh leaves out: without it the page is left out, said
# in one line. The tests (scripts/setup-tests.sh installs it) check the page, so they need it.
# Not in sanitizer or fuzzer builds: generating it runs their instrumented kache at build time.
set(kache_build_man OFF)
if(KACHE_MAN AND NOT KACHE_FUZZ AND NOT KACHE_SANITIZE)
  find_program(HELP2MAN help2man)
  if(HELP2MAN)
    set(kache_build_man ON)
  elseif(KACHE_TESTS)
    message(FATAL_ERROR "The tests need help2man for the manual page (bash scripts/setup-tests.sh installs it)")
  else()
    message(STATUS "Manual page left out: help2man is not installed (apt-get install help2man)")
  endif()
endif()
if(kache_build_man)
  set(kache_man ${PROJECT_BINARY_DIR}/man/kache.1)
  add_custom_command(OUTPUT ${kache_man}
    COMMAND ${CMAKE_COMMAND} -DKACHE=$<TARGET_FILE:kache> "-DVERSION=kache ${PROJECT_VERSION}" -DHELP2MAN=${HELP2MAN}
      -DSOURCE=${PROJECT_SOURCE_DIR}/man/kache.h2m -DOUT=${kache_man} -P ${PROJECT_SOURCE_DIR}/cmake/man.cmake
    DEPENDS kache ${PROJECT_SOURCE_DIR}/man/kache.h2m ${PROJECT_SOURCE_DIR}/cmake/man.cmake
    COMMENT "Generating the manual page kache.1")
  add_custom_target(kache-man ALL DEPENDS ${kache_man})
  install(FILES ${kache_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/completions/kache.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  RENAME kache)
install(FILES ${PROJECT_SOURCE_DIR}/completions/_kache DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/kache RENAME copyright)

# The masquerade links, relative so the tree can move (a package unpacked anywhere, DESTDIR).
set(KACHE_MASQUERADE_NAMES nvcc gcc g++ cc c++ clang clang++ hipcc)
# lib/kache whatever the multiarch library directory: it holds programs, not libraries (as ccache's
# /usr/lib/ccache).
set(kache_masquerade_dir lib/kache)
set(kache_links_dir ${PROJECT_BINARY_DIR}/masquerade)
file(MAKE_DIRECTORY ${kache_links_dir})
file(RELATIVE_PATH kache_link_target /prefix/${kache_masquerade_dir} /prefix/${CMAKE_INSTALL_BINDIR}/kache)
foreach(name ${KACHE_MASQUERADE_NAMES})
  file(CREATE_LINK ${kache_link_target} ${kache_links_dir}/${name} SYMBOLIC)
  install(FILES ${kache_links_dir}/${name} DESTINATION ${kache_masquerade_dir})
endforeach()

# cpack -G DEB (in the build directory): the same tree as a Debian package. The program needs no shared
# library (static), so the package depends on nothing.
set(CPACK_PACKAGE_NAME kache)
set(CPACK_PACKAGE_VENDOR "kache")
set(CPACK_PACKAGE_CONTACT "kache maintainers <kache@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "compiler cache for nvcc, gcc and clang")
set(CPACK_PACKAGE_DESCRIPTION "kache caches the results of nvcc, gcc, g++, clang and clang++ compiles,\
 locally and in shared stores (redis://, http:// and https://, s3:// buckets, file:// shared\
 directories), and runs the real compiler for anything it cannot prove\
 safe to cache. Licensed under the Apache License 2.0 (/usr/share/doc/kache/copyright).")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The program ships stripped; its debug info goes into kache-dbgsym (a .ddeb beside the .deb, files under
# /usr/lib/debug/.build-id/, found by gdb through the build id and the debug link).
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# Installed-Size counted once per file, links as links (CPack counts each link as its target).
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb_installed_size.cmake)
set(CPACK_GENERATOR DEB)
include(CPack)
