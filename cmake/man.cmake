# cmake -DKACHE=<kache> -DVERSION=<x.y.z> -DHELP2MAN=<help2man> -DSOURCE=man/kache.h2m -DOUT=<kache.1> -P cmake/man.cmake
#
# The manual page: help2man reads `kache --help` and `kache --version`; man/kache.h2m adds the prose;
# the SETTINGS and COMPILER ENVIRONMENT sections are made here from the binary's own tables
# (`kache --list-settings`, `kache --list-environment`), so no option, setting or variable can be
# missing from the page.
cmake_minimum_required(VERSION 3.25)

function(kache_table option out_var)
  execute_process(COMMAND ${KACHE} ${option} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${KACHE} ${option} failed (${rc})")
  endif()
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE ";" "\\;" text "${text}")
  string(REPLACE "\n" ";" rows "${text}")
  set(${out_var} "${rows}" PARENT_SCOPE)
endfunction()

kache_table(--list-settings settings)
set(page "[SETTINGS]\nEach setting is read from the environment variable named with it, else from the config file\n")
string(APPEND page "(TOML: the part before the dot is the table, \\fB[cache]\\fR \\fBdir = \"...\"\\fR), else takes its default.\n")
string(APPEND page "\\fBkache \\-\\-show\\-config\\fR prints each one's value and where it came from.\n")
foreach(row IN LISTS settings)
  string(REPLACE "\t" ";" fields "${row}")
  list(GET fields 0 name)
  list(GET fields 1 env)
  list(GET fields 2 kind)
  list(LENGTH fields n)
  set(default "")
  if(n GREATER 3)
    list(GET fields 3 default)
  endif()
  if(default STREQUAL "")
    string(APPEND page ".TP\n\\fB${name}\\fR, \\fB${env}\\fR\n${kind}\n")
  else()
    string(APPEND page ".TP\n\\fB${name}\\fR, \\fB${env}\\fR\n${kind}; default: ${default}\n")
  endif()
endforeach()

kache_table(--list-environment variables)
string(APPEND page "[COMPILER ENVIRONMENT]\nThe environment variables the compilers and their tools read, and what kache does with each\n")
string(APPEND page "(\\fInvcc\\fR: read by nvcc and the CUDA tools only).\n")
foreach(row IN LISTS variables)
  string(REPLACE "\t" ";" fields "${row}")
  list(GET fields 0 name)
  list(GET fields 1 scope)
  list(GET fields 2 effect)
  set(note "")
  if(scope STREQUAL "nvcc")
    set(note " (\\fInvcc\\fR)")
  endif()
  string(APPEND page ".TP\n\\fB${name}\\fR${note}\n${effect}\n")
endforeach()

file(READ ${SOURCE} prose)
get_filename_component(out_dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${out_dir})
file(WRITE ${out_dir}/kache.h2m "${prose}\n${page}")
# --version-string: the first line of `kache --version`; the build features after it belong to the binary.
execute_process(COMMAND ${HELP2MAN} --no-info --section=1 --include=${out_dir}/kache.h2m "--version-string=${VERSION}"
  "--name=a compiler cache for nvcc, gcc and clang" --output=${OUT} ${KACHE}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc})")
endif()
