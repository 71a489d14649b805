# The deliberate bugs (CORRUPTIONS.md), one file each: corruptions/<name>.cc.
# A corruption build (-DVERITY_CORRUPTION=<name>) compiles that file into the
# library of the layer it changes, in place of that layer's defaults
# (kernels_none.cc, engine_none.cc); a normal build compiles only the
# defaults. This choice of source files is the only way a corruption is
# selected: no source tests a corruption's name or a define.
#
# Adding one: corruptions/<name>.cc (override one hook of kernel_hooks.h or
# engine_hooks.h, define its Active*Hooks()), its name in the list of its
# layer below, and its row in CORRUPTIONS.md.
#
# work-twice is the one speed bug (correct numbers, every matmul and
# attention step run twice): not a CORRUPTIONS.md row, since parity must pass
# it; the demo (scripts/demo.sh) scores its fix.
set(VERITY_KERNEL_CORRUPTIONS rope-freq-dim attention-stale-past-128 gelu-for-silu rope-halves softmax-plus-one
  kquant-scales-swapped qkv-bias-dropped qk-norm-dropped window-ignored attn-softcap-skipped work-twice)
set(VERITY_ENGINE_CORRUPTIONS kv-stride-masked rope-theta-default tp-band-gap tp-kv-naive tp-reduce-past-norm
  fused-qkv-misplit gemma-norm-offset-dropped)
set(VERITY_KNOWN_CORRUPTIONS ${VERITY_KERNEL_CORRUPTIONS} ${VERITY_ENGINE_CORRUPTIONS})

set(_dir ${CMAKE_CURRENT_LIST_DIR})
foreach(_name IN LISTS VERITY_KNOWN_CORRUPTIONS)
  if(NOT EXISTS ${_dir}/${_name}.cc)
    message(FATAL_ERROR "corruption ${_name} is listed in corruptions/corruptions.cmake but ${_dir}/${_name}.cc is missing")
  endif()
endforeach()
file(GLOB _files RELATIVE ${_dir} ${_dir}/*.cc)
foreach(_file IN LISTS _files)
  string(REGEX REPLACE "\\.cc$" "" _name "${_file}")
  if(NOT _name IN_LIST VERITY_KNOWN_CORRUPTIONS AND NOT _name MATCHES "^(kernels|engine)_none$")
    message(FATAL_ERROR "corruptions/${_file} is no listed corruption: add it to a layer's list in corruptions/corruptions.cmake")
  endif()
endforeach()

# The sources each layer's library compiles (kernels/, engine/).
set(VERITY_KERNEL_HOOKS_SRC ${_dir}/kernels_none.cc)
set(VERITY_ENGINE_HOOKS_SRC ${_dir}/engine_none.cc)
if(VERITY_CORRUPTION)
  if(NOT VERITY_CORRUPTION IN_LIST VERITY_KNOWN_CORRUPTIONS)
    message(FATAL_ERROR "VERITY_CORRUPTION=${VERITY_CORRUPTION} is not one of: ${VERITY_KNOWN_CORRUPTIONS}")
  endif()
  message(WARNING "Building with deliberate corruption '${VERITY_CORRUPTION}' (tests only)")
  if(VERITY_CORRUPTION IN_LIST VERITY_KERNEL_CORRUPTIONS)
    set(VERITY_KERNEL_HOOKS_SRC ${_dir}/${VERITY_CORRUPTION}.cc)
  else()
    set(VERITY_ENGINE_HOOKS_SRC ${_dir}/${VERITY_CORRUPTION}.cc)
  endif()
endif()
