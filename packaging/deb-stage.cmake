# Run by cpack (CPACK_PRE_BUILD_SCRIPTS) on the staging tree, after the install and before the
# package is built, so dpkg-shlibdeps and md5sums see the final files. Adds what Debian policy
# asks of a binary package and a plain `cmake --install` should not do.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()

set(usr "${CPACK_TEMPORARY_DIRECTORY}${CPACK_PACKAGING_INSTALL_PREFIX}")
set(doc "${usr}/share/doc/${CPACK_PACKAGE_NAME}")
set(src "${CPACK_LOCK_SOURCE_DIR}")

# gzip -9n: no name and no time stamp in the header, so the package is reproducible.
function(gzip_in_place file)
  execute_process(COMMAND gzip -9nf "${file}" RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "gzip -9nf ${file} failed")
  endif()
endfunction()

# Files this script makes would otherwise take their mode from the umask of whoever runs cpack.
function(stage_file from to)
  get_filename_component(dir "${to}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  configure_file("${from}" "${to}" COPYONLY)
  file(CHMOD "${to}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endfunction()

# Stripped as dh_strip does: cpack's own stripping leaves the .comment and .note sections.
file(GLOB_RECURSE staged_files LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(path IN LISTS staged_files)
  if(IS_SYMLINK "${path}")
    continue()
  endif()
  file(READ "${path}" magic LIMIT 4 HEX)
  if(magic STREQUAL "7f454c46")
    set(options --remove-section=.comment --remove-section=.note)
    if(path MATCHES "\\.so(\\.[0-9]+)*$")
      list(APPEND options --strip-unneeded)
    endif()
    execute_process(COMMAND "${CPACK_LOCK_STRIP}" ${options} "${path}" RESULT_VARIABLE failed)
    if(failed)
      message(FATAL_ERROR "${CPACK_LOCK_STRIP} ${options} ${path} failed")
    endif()
  endif()
endforeach()

file(GLOB manual_pages "${usr}/share/man/man*/*")
foreach(page IN LISTS manual_pages)
  if(NOT page MATCHES "\\.gz$")
    gzip_in_place("${page}")
  endif()
endforeach()

# Machine-readable copyright: packaging/copyright, then the Expat text of LICENSE in its format
# (the notice and the permission, each line indented, blank lines as " .").
file(READ "${src}/packaging/copyright" copyright)
file(STRINGS "${src}/LICENSE" license_lines)
set(expat "")
set(in_text FALSE)
foreach(line IN LISTS license_lines)
  if(line MATCHES "^Permission is hereby granted")
    set(in_text TRUE)
  endif()
  if(in_text)
    if(line STREQUAL "")
      string(APPEND expat " .\n")
    else()
      string(APPEND expat " ${line}\n")
    endif()
  endif()
endforeach()
if(expat STREQUAL "")
  message(FATAL_ERROR "${src}/LICENSE: no Expat permission text found")
endif()
file(WRITE "${CPACK_TOPLEVEL_DIRECTORY}/copyright" "${copyright}\nLicense: Expat\n${expat}")
stage_file("${CPACK_TOPLEVEL_DIRECTORY}/copyright" "${doc}/copyright")

stage_file("${src}/packaging/changelog" "${doc}/changelog.Debian")
gzip_in_place("${doc}/changelog.Debian")

stage_file("${src}/packaging/lintian-overrides"
           "${usr}/share/lintian/overrides/${CPACK_PACKAGE_NAME}")

file(GLOB examples "${src}/packaging/examples/*")
foreach(example IN LISTS examples)
  get_filename_component(name "${example}" NAME)
  stage_file("${example}" "${doc}/examples/${name}")
endforeach()

# Directories this script made, like its files, would follow the umask.
file(GLOB_RECURSE staged LIST_DIRECTORIES true "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(path IN LISTS staged)
  if(IS_DIRECTORY "${path}")
    file(CHMOD "${path}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                     WORLD_READ WORLD_EXECUTE)
  endif()
endforeach()
