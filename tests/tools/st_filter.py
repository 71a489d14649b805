#!/usr/bin/env python3
"""Simulates a filtered download: copies a Hugging Face directory, dropping every
tensor whose name matches --drop (a regular expression) from its shards and the
index, as if the files holding them had never arrived.

usage: st_filter.py IN_DIR OUT_DIR --drop REGEX
"""
import argparse, json, os, re, shutil, struct

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("dst")
ap.add_argument("--drop", required=True)
a = ap.parse_args()
drop = re.compile(a.drop)
os.makedirs(a.dst, exist_ok=True)
kept_total, dropped, weight_map = 0, 0, {}
for name in sorted(os.listdir(a.src)):
    path = os.path.join(a.src, name)
    if not name.endswith(".safetensors"):
        if name != "model.safetensors.index.json":
            shutil.copy(path, os.path.join(a.dst, name))
        continue
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out_header, chunks, at = {}, [], 0
    for t, e in sorted(((t, e) for t, e in header.items() if t != "__metadata__"), key=lambda x: x[1]["data_offsets"][0]):
        if drop.search(t):
            dropped += 1
            continue
        b, en = e["data_offsets"]
        out_header[t] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [at, at + en - b]}
        chunks.append(data[b:en])
        at += en - b
        weight_map[t] = name
    kept_total += at
    h = json.dumps(out_header).encode()
    h += b" " * ((8 - (len(h) + 8) % 8) % 8)
    with open(os.path.join(a.dst, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
if os.path.exists(os.path.join(a.src, "model.safetensors.index.json")):
    json.dump({"metadata": {"total_size": kept_total}, "weight_map": weight_map},
              open(os.path.join(a.dst, "model.safetensors.index.json"), "w"), indent=2)
print(f"st_filter: dropped {dropped} tensors matching {a.drop}")
