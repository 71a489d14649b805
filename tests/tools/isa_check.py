#!/usr/bin/env python3
"""The ISA check: no function in a built binary runs an instruction its
dispatch does not guarantee the CPU has.

objdump (binutils) disassembles each binary. Every function is attributed to
the Highway target whose namespace it lives in (N_AVX2, N_AVX3_DL, ...; the
run-time check of that target is what guarantees its extensions), to a
function listed in GUARDED below (compiled with its own target attribute and
called only behind a CPU check, which this script finds in the source), or
else to the x86-64 baseline (SSE2). Each instruction's required extensions
come from its encoding (VEX, EVEX, XOP: the raw bytes) and its mnemonic.

Prints one line per instruction outside its function's guarantee (at most
--show of them), then always the summary
  isa check: F functions, I instructions, N outside their target's guarantee
and exits 1 when N > 0 (or when it examined nothing).
"""
import argparse
import os
import re
import subprocess
import sys

# Extensions each Highway 1.0.3 x86 target's run-time check guarantees
# (hwy/targets.cc's groups; AVX, AVX2, FMA and F16C go together as "AVX2",
# AVX512 F/VL/DQ/BW as "AVX512": no target has one without the others).
# POPCNT rides with SSE4: every CPU with SSE4.2 has it.
BASELINE = {"SSE2"}
SSSE3 = BASELINE | {"SSE3", "SSSE3"}
SSE4 = SSSE3 | {"SSE4", "POPCNT", "AES", "PCLMUL"}
AVX2 = SSE4 | {"AVX2", "BMI"}
AVX3 = AVX2 | {"AVX512"}
AVX3_DL = AVX3 | {"AVX512_VNNI", "AVX512_VBMI", "AVX512_VBMI2", "VAES", "VPCLMULQDQ",
                  "AVX512_BITALG", "AVX512_VPOPCNTDQ"}
TARGETS = {"SCALAR": BASELINE, "EMU128": BASELINE, "SSE2": BASELINE, "SSSE3": SSSE3,
           "SSE4": SSE4, "AVX2": AVX2, "AVX3": AVX3, "AVX3_DL": AVX3_DL}

# Functions outside Highway compiled with their own target attribute: each is
# called only behind the CPU check named here, which must appear in `source`.
# None today: the roofline's hand-written loops became probe/'s Highway code.
GUARDED = [
    # (function name regex, extensions, source file, the guard in that file)
]

SSE3_OPS = {"addsubps", "addsubpd", "haddps", "haddpd", "hsubps", "hsubpd", "lddqu", "movddup",
            "movshdup", "movsldup", "fisttp", "fisttps", "fisttpl", "fisttpll", "monitor", "mwait"}
SSSE3_OPS = {"pshufb", "palignr", "phaddw", "phaddd", "phaddsw", "phsubw", "phsubd", "phsubsw",
             "pmaddubsw", "pmulhrsw", "psignb", "psignw", "psignd", "pabsb", "pabsw", "pabsd"}
SSE4_OPS = {"pblendvb", "pblendw", "blendps", "blendpd", "blendvps", "blendvpd", "dpps", "dppd",
            "insertps", "extractps", "pextrb", "pextrd", "pextrq", "pinsrb", "pinsrd", "pinsrq",
            "pmaxsb", "pmaxsd", "pmaxuw", "pmaxud", "pminsb", "pminsd", "pminuw", "pminud",
            "pmuldq", "pmulld", "packusdw", "pcmpeqq", "ptest", "roundps", "roundpd", "roundss",
            "roundsd", "mpsadbw", "phminposuw", "movntdqa", "pcmpgtq", "pcmpestri", "pcmpestrm",
            "pcmpistri", "pcmpistrm", "crc32", "crc32b", "crc32w", "crc32l", "crc32q"}
SSE4_PREFIXES = ("pmovsx", "pmovzx")
BMI_OPS = {"andn", "bextr", "blsi", "blsmsk", "blsr", "tzcnt", "bzhi", "mulx", "pdep", "pext",
           "rorx", "sarx", "shlx", "shrx"}
AMX_OPS = {"ldtilecfg", "sttilecfg", "tilerelease", "tilezero", "tileloadd", "tileloaddt1",
           "tilestored", "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps",
           "tcmmimfp16ps", "tcmmrlfp16ps"}
VNNI_OPS = {"vpdpbusd", "vpdpbusds", "vpdpwssd", "vpdpwssds"}
VNNI_INT8_OPS = re.compile(r"^vpdpb(ss|su|uu)ds?$|^vpdpw(su|us|uu)ds?$")
BF16_OPS = {"vdpbf16ps", "vcvtne2ps2bf16", "vcvtneps2bf16"}
NE_CONVERT = re.compile(r"^vbcstne(bf16|sh)2ps$|^vcvtne(e|o)(bf16|ph)2ps$")
BY_MNEMONIC = [  # (regex, extension): checked in order, first match wins
    (re.compile(r"^vpermb$|^vperm[it]2b$|^vpmultishiftqb$"), "AVX512_VBMI"),
    (re.compile(r"^vp(compress|expand)[bw]$|^vpsh[lr]dv?[wdq]$"), "AVX512_VBMI2"),
    (re.compile(r"^vpopcnt[bw]$|^vpshufbitqmb$"), "AVX512_BITALG"),
    (re.compile(r"^vpopcnt[dq]$"), "AVX512_VPOPCNTDQ"),
    (re.compile(r"^vpconflict[dq]$|^vplzcnt[dq]$|^vpbroadcastm(b2q|w2d)$"), "AVX512CD"),
    (re.compile(r"^v(exp2|rcp28|rsqrt28)|^v(gather|scatter)pf"), "AVX512ER_PF"),
    (re.compile(r"^v?gf2p8"), "GFNI"),
    (re.compile(r"^vp2intersect"), "AVX512_VP2INTERSECT"),
    (re.compile(r"^v\w*(ph|sh)$"), "AVX512_FP16"),  # vcvtph2ps/vcvtps2ph end otherwise
]
PREFIXES = {"rep", "repz", "repe", "repnz", "repne", "lock", "notrack", "bnd", "data16", "addr32",
            "cs", "ds", "ss", "es", "fs", "gs", "xacquire", "xrelease"}
LEGACY_PREFIX_BYTES = {0x66, 0x67, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0xF0}
EVEX_ONLY_REG = re.compile(r"%(zmm\d+|[xy]mm(1[6-9]|2\d|3[01])|k[0-7])\b")


def encoding(raw):
    """'evex', 'vex', 'xop' or 'legacy', from the instruction's bytes."""
    i = 0
    while i < len(raw) and (raw[i] in LEGACY_PREFIX_BYTES or 0x40 <= raw[i] <= 0x4F):
        i += 1
    if i >= len(raw):
        return "legacy"
    b = raw[i]
    if b == 0x62:  # BOUND is invalid in 64-bit mode: 0x62 is always EVEX
        return "evex"
    if b in (0xC4, 0xC5):  # LES/LDS are invalid in 64-bit mode
        return "vex"
    if b == 0x8F and i + 1 < len(raw) and (raw[i + 1] & 0x1F) >= 8:  # POP r/m has map 0
        return "xop"
    return "legacy"


def required(raw, text):
    """The extensions an instruction needs beyond the x86-64 baseline."""
    words = text.split()
    vex_prefix = False
    while words and (words[0] in PREFIXES or words[0].startswith("rex") or words[0].startswith("{")):
        vex_prefix |= words[0] in ("{vex}", "{vex3}")
        words = words[1:]
    if not words:
        return set()
    op, operands = words[0], " ".join(words[1:])
    enc = encoding(raw)
    need = set()
    if enc == "xop":
        return {"XOP"}
    if op in AMX_OPS or op.startswith("tile"):
        return {"AMX"}
    if enc == "evex" or EVEX_ONLY_REG.search(operands) or op.startswith("k"):
        need.add("AVX512")
    elif enc == "vex":
        need.add("BMI" if op in BMI_OPS else "AVX2")
    if op in VNNI_OPS:
        need.add("AVX_VNNI" if (vex_prefix or enc == "vex") else "AVX512_VNNI")
    elif VNNI_INT8_OPS.match(op):
        need.add("AVX_VNNI_INT8")
    elif op in BF16_OPS:
        need.add("AVX_NE_CONVERT" if (vex_prefix or enc == "vex") else "AVX512_BF16")
    elif NE_CONVERT.match(op):
        need.add("AVX_NE_CONVERT")
    elif op.startswith("vpmadd52"):
        need.add("AVX_IFMA" if (vex_prefix or enc == "vex") else "AVX512_IFMA")
    elif op.startswith("vaes") and re.search(r"%[yz]mm", operands):
        need.add("VAES")
    elif op.startswith("vpclmul") and re.search(r"%[yz]mm", operands):
        need.add("VPCLMULQDQ")
    else:
        for pattern, ext in BY_MNEMONIC:
            if pattern.match(op) and not op.startswith(("vcvtph2ps", "vcvtps2ph")):
                need.add(ext)
                break
    if enc == "legacy":
        base = op.rstrip("lqwb") if op.startswith("crc32") else op
        if op in SSE3_OPS:
            need.add("SSE3")
        elif op in SSSE3_OPS:
            need.add("SSSE3")
        elif op in SSE4_OPS or base in SSE4_OPS or op.startswith(SSE4_PREFIXES):
            need.add("SSE4")
        elif op.startswith("popcnt"):
            need.add("POPCNT")
        elif op.startswith("lzcnt"):
            need.add("LZCNT")
        # tzcnt without VEX is rep bsf: a CPU without BMI1 runs it as bsf,
        # which compilers rely on only where the input is not zero.
        elif op.startswith("aes"):
            need.add("AES")
        elif op.startswith("pclmul"):
            need.add("PCLMUL")
        elif op.startswith("sha1") or op.startswith("sha256"):
            need.add("SHA")
        elif op.startswith("movbe"):
            need.add("MOVBE")
        elif op in ("adcx", "adox", "adcxl", "adcxq", "adoxl", "adoxq"):
            need.add("ADX")
    return need


def strip_nested(name):
    """The function's own qualified name: template and parameter lists removed."""
    out, depth = [], 0
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def guarantee(func, guards):
    """(target label, extensions guaranteed) for a demangled function name."""
    own = strip_nested(func)
    m = re.search(r"\bN_([A-Z0-9_]+)::", own)
    if m:
        target = m.group(1)
        if target not in TARGETS:
            return target, BASELINE  # a target this script does not know: baseline only
        return target, TARGETS[target]
    for pattern, exts, label in guards:
        if re.search(pattern, own):
            return label, exts
    return "baseline", BASELINE


LINE = re.compile(r"^\s*[0-9a-f]+:\s*((?:[0-9a-f]{2} )+)\s*(.*)$")
FUNC = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def check(binary, guards, report, show):
    proc = subprocess.run(["objdump", "-d", "-w", "-C", binary], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"isa check: objdump -d {binary} failed: {proc.stderr.strip()}")
    funcs = insns = 0
    func, label, allowed = None, "baseline", BASELINE
    for line in proc.stdout.splitlines():
        m = FUNC.match(line)
        if m:
            func = m.group(1)
            label, allowed = guarantee(func, guards)
            funcs += 1
            continue
        m = LINE.match(line)
        if not m or func is None:
            continue
        text = m.group(2).strip()
        if not text or text.startswith("(bad)"):
            continue
        insns += 1
        raw = bytes(int(b, 16) for b in m.group(1).split())
        outside = required(raw, text) - allowed
        if outside:
            report.append((binary, func, label, text, outside))
            if len(report) <= show:
                print(f"{os.path.basename(binary)}: {func} [{label}]: {text}: needs "
                      f"{', '.join(sorted(outside))}", flush=True)
    return funcs, insns


def load_guards(source_dir):
    guards = []
    for pattern, exts, source, guard in GUARDED:
        path = os.path.join(source_dir, source)
        try:
            text = open(path, encoding="utf-8").read()
        except OSError as e:
            sys.exit(f"isa check: {path}: {e.strerror} (the guard of {pattern} should be there)")
        if guard not in text:
            sys.exit(f"isa check: {source} no longer holds '{guard}', the CPU check that lets "
                     f"{pattern} use {', '.join(sorted(exts - BASELINE))}")
        guards.append((pattern, exts, f"guarded:{source}"))
    return guards


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+", help="ELF files to disassemble")
    ap.add_argument("--source-dir", required=True, help="the source tree (to find the CPU checks of GUARDED)")
    ap.add_argument("--show", type=int, default=40, help="instructions outside their guarantee to list")
    args = ap.parse_args()
    guards = load_guards(args.source_dir)
    report, funcs, insns = [], 0, 0
    for b in args.binaries:
        if not os.path.isfile(b):
            sys.exit(f"isa check: {b}: no such file")
        f, i = check(b, guards, report, args.show)
        funcs, insns = funcs + f, insns + i
    if len(report) > args.show:
        print(f"... and {len(report) - args.show} more")
    by_func = {}
    for binary, func, label, _, outside in report:
        by_func.setdefault((os.path.basename(binary), func, label), set()).update(outside)
    for (binary, func, label), outside in sorted(by_func.items()):
        print(f"  outside: {binary}: {func} [{label}] needs {', '.join(sorted(outside))}")
    print(f"isa check: {funcs} functions, {insns} instructions, {len(report)} outside their target's guarantee")
    if funcs == 0 or insns == 0:
        print("isa check: FAIL (nothing was disassembled)")
        return 1
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
