#!/usr/bin/python3
"""Dequantizes every tensor of a GGUF file with gguf-py, llama.cpp's own
Python package (its GGUFReader and gguf.quants.dequantize: NumPy code written
apart from llama.cpp's C dequantizers), for tests/quants_test.cc to compare
with verity's formats/quants bit for bit.

    gguf_py_dequant.py GGUF_PY_DIR FILE.gguf OUT_DIR

GGUF_PY_DIR is the gguf-py directory extracted from tests/npm's llama.cpp
source bundle (tests/CMakeLists.txt). Writes OUT_DIR/K.f32 (raw little-endian
f32, row-major, GGUF element order) for the K-th tensor in file order and
OUT_DIR/index.tsv: one line per tensor, "K<TAB>name<TAB>type<TAB>elements".
Run with /usr/bin/python3 (Debian's python3-numpy).
"""
import os
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    gguf_py, path, out = sys.argv[1:]
    sys.path.insert(0, gguf_py)
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    os.makedirs(out, exist_ok=True)
    reader = GGUFReader(path)
    lines = []
    for k, t in enumerate(reader.tensors):
        values = dequantize(t.data, t.tensor_type)
        values = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        if values.size != int(t.n_elements):
            print(f"gguf_py_dequant: {path}: tensor {t.name}: {values.size} values for {t.n_elements} elements",
                  file=sys.stderr)
            return 1
        values.astype("<f4").tofile(os.path.join(out, f"{k}.f32"))
        lines.append(f"{k}\t{t.name}\t{t.tensor_type.name}\t{values.size}\n")
    with open(os.path.join(out, "index.tsv"), "w") as f:
        f.writelines(lines)
    print(f"gguf_py_dequant: {path}: {len(lines)} tensors -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
