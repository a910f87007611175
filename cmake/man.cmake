# Man pages (section 1) for the tools, made from each tool's --help by help2man with
# the sections of docs/man/TOOL.h2m, so that a page says what the tool does; installed
# with the tools (the fold-tools package). Where help2man is missing they are not built.
include(GNUInstallDirs)
find_program(HELP2MAN help2man)
set(FOLD_MAN_PAGES "")
set(FOLD_MAN_TOOLS "")   # the tools that have a page (tests/tools/man_pages.sh checks them)
if(HELP2MAN)
  foreach(tool fold_info fold_perf fold_tune)
    if(TARGET ${tool})
      set(page ${CMAKE_BINARY_DIR}/man/${tool}.1)
      set(sections ${CMAKE_SOURCE_DIR}/docs/man/${tool}.h2m)
      # The tool runs at build time: under the sanitizers its exit need not report leaks.
      add_custom_command(OUTPUT ${page}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
        COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
                ${HELP2MAN} --no-info --include=${sections}
                --version-string=${PROJECT_VERSION} --output=${page} $<TARGET_FILE:${tool}>
        DEPENDS ${tool} ${sections}
        COMMENT "Making the man page of ${tool}" VERBATIM)
      list(APPEND FOLD_MAN_PAGES ${page})
      list(APPEND FOLD_MAN_TOOLS ${tool})
    endif()
  endforeach()
  add_custom_target(man ALL DEPENDS ${FOLD_MAN_PAGES})
  install(FILES ${FOLD_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
else()
  message(STATUS "help2man not found: the tools' man pages are not built")
endif()
