#!/usr/bin/env bash
# Decode against the box's free read bandwidth, run by run: a `verity roofline
# --probe` before and after every `verity bench` (the ~110M synth of issue 10,
# 16-token prompt, 64 generated, 1 s of decoding per sample), then each run's
# GB/s as a fraction of the mean of the two probes beside it. This box's
# neighbours take ~40% of its 2-thread bandwidth for tens of seconds at a time,
# so the runs are grouped by the free bandwidth they met (a "quiet" probe
# reads at least 85% of the box's cached roofline at that thread count, its
# best ever; "busy" below) and a run whose two probes differ by more than 5%
# (the box changed during it) is left out and counted.
#
#   scripts/bandwidth-scan.sh [RUNS] [DTYPE] [THREADS]   (default 30 f32 2; ~4 s a run)
#
# VERITY=path runs another binary. Records: out/bandwidth-scan/records.jsonl
# (stderr of every run: out/bandwidth-scan/stderr.log).
set -euo pipefail
trap 'echo "bandwidth-scan: failed at line $LINENO (stderr of the runs: out/bandwidth-scan/stderr.log)" >&2' ERR
cd "$(dirname "$0")/.."
runs=${1:-30} dtype=${2:-f32} threads=${3:-2}
v=${VERITY:-build/cli/verity}
model=.verity/models/synth-110m-ctx1024.bin
out=out/bandwidth-scan
mkdir -p "$out" "$(dirname "$model")"
[ -f "$model" ] || "$v" synth --out "$model" --config \
  '{"dim":768,"hidden_dim":2048,"n_layers":12,"n_heads":12,"n_kv_heads":4,"vocab_size":32000,"seq_len":1024,"shared_classifier":false}'
: > "$out/records.jsonl"
: > "$out/stderr.log"
"$v" roofline --json > "$out/roofline.json" 2>> "$out/stderr.log"
probe() {
  local p
  p=$("$v" roofline --probe --json --buffer-mb 512 --repetitions 5 2>> "$out/stderr.log")
  echo "{\"kind\":\"probe\",\"seq\":$1,\"record\":$p}" >> "$out/records.jsonl"
}
probe 0
for i in $(seq 1 "$runs"); do
  rec=$("$v" bench --model "$model" --threads "$threads" --dtype "$dtype" --prompt-tokens 16 --gen-tokens 64 \
        --min-seconds 1 --output json 2>> "$out/stderr.log")
  echo "{\"kind\":\"bench\",\"seq\":$i,\"record\":$rec}" >> "$out/records.jsonl"
  probe "$i"
done
/usr/bin/python3 - "$out/records.jsonl" "$threads" "$out/roofline.json" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
threads = int(sys.argv[2])
def at_threads(points, what):
    for p in points:
        if p["threads"] == threads:
            return p["best"]
    sys.exit(f"bandwidth-scan: {what} has no point at {threads} thread(s) (it measures 1, powers of two and every core)")
best = at_threads(json.load(open(sys.argv[3]))["read_gb_s"], "the cached roofline")
probe = {r["seq"]: at_threads(r["record"]["read_gb_s"], "a probe") for r in recs if r["kind"] == "probe"}
if not probe:
    sys.exit("bandwidth-scan: no probe recorded")
fastest = max(probe.values())
rows, changed = [], 0
for r in recs:
    if r["kind"] != "bench":
        continue
    a, b = probe[r["seq"] - 1], probe[r["seq"]]
    if abs(a - b) > 0.05 * max(a, b):
        changed += 1
        continue
    gb = r["record"]["roofline"]["achieved_gb_s"]
    rows.append(((a + b) / 2, gb, gb / ((a + b) / 2)))
print(f"bandwidth-scan: {len(rows) + changed} runs at {threads} thread(s), {changed} left out (probes beside "
      f"them differ by > 5%); probes up to {fastest:.1f} GB/s, the box's cached best {best:.1f}")
if not rows:
    sys.exit("bandwidth-scan: no run had agreeing probes: nothing to report")
for name, keep in (("quiet", lambda p: p >= 0.85 * best), ("busy", lambda p: p < 0.85 * best)):
    g = [x for x in rows if keep(x[0])]
    if not g:
        print(f"{name}: no runs")
        continue
    f = sorted(x[2] for x in g)
    print(f"{name}: {len(g)} runs, probe {min(x[0] for x in g):.1f}-{max(x[0] for x in g):.1f} GB/s, decode "
          f"{min(x[1] for x in g):.1f}-{max(x[1] for x in g):.1f} GB/s; of probe median {100 * statistics.median(f):.1f}% "
          f"(min {100 * f[0]:.1f}%, max {100 * f[-1]:.1f}%)")
PY
