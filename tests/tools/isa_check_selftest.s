# The ISA check's own test: one function per kind of instruction it must
# refuse (and two it must accept), named as Highway's namespaces name them.
# tests/tools/isa_check_selftest.sh assembles it and expects exactly the 7
# refusals listed there.
.text
.globl _ZN1a6N_AVX24probEv
_ZN1a6N_AVX24probEv:
  vpdpwssd %zmm1,%zmm2,%zmm3
  ret
.globl _ZN1a9N_AVX3_DL3vexEv
_ZN1a9N_AVX3_DL3vexEv:
  {vex} vpdpwssd %ymm1,%ymm2,%ymm3
  ret
.globl _ZN1a9N_AVX3_DL2okEv
_ZN1a9N_AVX3_DL2okEv:
  vpdpwssd %zmm1,%zmm2,%zmm3
  vpdpwssd %ymm1,%ymm2,%ymm3
  vpermb %zmm1,%zmm2,%zmm3
  ret
.globl _ZN1a6N_AVX34bf16Ev
_ZN1a6N_AVX34bf16Ev:
  vdpbf16ps %zmm1,%zmm2,%zmm3
  ret
.globl _ZN1a9N_AVX3_DL3amxEv
_ZN1a9N_AVX3_DL3amxEv:
  tdpbssd %tmm1,%tmm2,%tmm3
  ret
.globl _Z5plainv
_Z5plainv:
  vaddps %ymm0,%ymm1,%ymm2
  pshufb %xmm0,%xmm1
  tzcnt %rax,%rax
  ret
.globl _ZN1a6N_AVX24fineEv
_ZN1a6N_AVX24fineEv:
  vfmadd231ps %ymm0,%ymm1,%ymm2
  shlx %rax,%rbx,%rcx
  pmulld %xmm1,%xmm2
  ret
.globl _ZN1a6N_AVX24evexEv
_ZN1a6N_AVX24evexEv:
  {evex} vpaddd %ymm1,%ymm2,%ymm3
  ret
