# Writes build_id.h with the current git commit; rewrites only when it changed,
# so a commit without a rebuild is visible as a stale build id.
execute_process(COMMAND git -C "${SRC}" rev-parse HEAD OUTPUT_VARIABLE sha
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR sha STREQUAL "")
  set(id "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(id "${sha}")
  if(NOT dirty STREQUAL "")
    set(id "${sha}-dirty")
  endif()
endif()
set(content "#pragma once\n#define VERITY_BUILD_ID \"${id}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
else()
  set(old "")
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
