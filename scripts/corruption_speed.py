#!/usr/bin/env python3
"""Decode speed of each corrupted build relative to main, interleaved on one box.

For every corrupted binary under build/corruptions/<name>/ (`cmake --build build
--target corrupted_builds` makes them all), runs `verity bench` of main and of
the corrupted build in ABBA rounds (main, corrupt, corrupt, main) and prints the
median of the per-round ratios corrupt/main of decode_tok_s. Same model, same
steps, same box, interleaved so that drift cancels within a round.
usage: scripts/corruption_speed.py [--rounds N] [--steps N] [--model PATH] [--only NAME]
"""
import argparse, json, os, statistics, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=8)
ap.add_argument("--steps", type=int, default=512)
ap.add_argument("--model", default="models/stories260K.bin")
ap.add_argument("--only", help="one corrupted binary (its name), not every one under build/corruptions/")
args = ap.parse_args()

def bench(binary):
    out = subprocess.run([binary, "bench", "--model", args.model, "--steps", str(args.steps), "--backend", "fast"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["metrics"]["decode_tok_s"]

main = "build/cli/verity"
if not os.path.isdir("build/corruptions"):
    sys.exit("corruption_speed: no build/corruptions/: run `cmake --build build --target corrupted_builds` first")
names = sorted(d for d in os.listdir("build/corruptions") if os.path.isdir(os.path.join("build/corruptions", d)))
if args.only:
    names = [n for n in names if n == args.only]
for name in names:
    corrupt = os.path.join("build/corruptions", name, "verity")
    if not os.path.exists(corrupt):
        continue
    ratios = []
    for _ in range(args.rounds):
        m1, c1, c2, m2 = bench(main), bench(corrupt), bench(corrupt), bench(main)
        ratios.append((c1 + c2) / (m1 + m2))
    ratios.sort()
    print(f"{name}: decode speed vs main x{statistics.median(ratios):.3f} "
          f"(rounds={args.rounds}, range {ratios[0]:.3f}..{ratios[-1]:.3f})")
print(f"corruption_speed: builds={len(names)} rounds={args.rounds} steps={args.steps}")
