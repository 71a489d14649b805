#!/usr/bin/env bash
# Tensor-parallel decode speed against one rank on this box (docs/tensor-parallel.md,
# "Speed"): `verity bench` on the ~110M synth (issue 10's shape, 256-token
# context, f32) for one rank at 1..N threads and for tp=2 and 4 in-process
# and under mpirun, interleaved round by round so a slow minute hits every
# configuration alike. Prints one line per run and a table of medians.
#
#   scripts/tp-scaling.sh [ROUNDS] [VERITY]   (default 2 rounds, build/cli/verity)
#
# Configurations needing more cores than the box has are skipped (named).
# mpirun runs as root with --allow-run-as-root, and --bind-to none so a
# rank's threads are not confined to one core.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
v=$(realpath "${2:-build/cli/verity}")
out=$(mktemp -d /tmp/tp-scaling.XXXXXX)
model=$out/synth-110m-ctx256.bin
"$v" synth --out "$model" --config \
  '{"dim":768,"hidden_dim":2048,"n_layers":12,"n_heads":12,"n_kv_heads":4,"vocab_size":32000,"seq_len":256,"shared_classifier":false}' \
  >/dev/null
cores=$(nproc)
echo "tp-scaling: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $rounds round(s)"
mpi=""
command -v mpirun >/dev/null && mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none"

# name|tp|threads per rank|collective
configs=()
for t in 1 2 4 8 16; do [[ $t -le $cores ]] && configs+=("tp1-${t}t|1|$t|inproc"); done
for tp in 2 4; do
  for t in 1 2 4; do
    [[ $((tp * t)) -le $cores ]] || { echo "tp-scaling: skipped tp=$tp x $t threads (needs $((tp * t)) cores)"; continue; }
    configs+=("tp$tp-${t}t-inproc|$tp|$t|inproc")
    [[ -n $mpi ]] && configs+=("tp$tp-${t}t-mpi|$tp|$t|mpi")
  done
done
[[ -n $mpi ]] || echo "tp-scaling: no mpirun: MPI configurations skipped"

: >"$out/runs.txt"
for r in $(seq 1 "$rounds"); do
  for c in "${configs[@]}"; do
    IFS='|' read -r name tp t coll <<<"$c"
    cmd=("$v" bench --model "$model" --steps 128 --min-seconds 2 --threads "$t" --output json)
    [[ $tp -gt 1 ]] && cmd+=(--tp "$tp" --tp-backend "$coll")
    if [[ $coll == mpi ]]; then
      rec=$($mpi -np "$tp" "${cmd[@]}" 2>"$out/err") || { tail -3 "$out/err"; echo "tp-scaling: $name failed"; continue; }
    else
      rec=$("${cmd[@]}" 2>"$out/err") || { tail -3 "$out/err"; echo "tp-scaling: $name failed"; continue; }
    fi
    tok=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["metrics"]["decode_tok_s"])' "$rec")
    echo "round $r $name: decode $tok tok/s"
    echo "$name $tok" >>"$out/runs.txt"
  done
done
python3 - "$out/runs.txt" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    name, tok = line.split()
    by.setdefault(name, []).append(float(tok))
if not by:
    sys.exit("tp-scaling: no run succeeded")
base = statistics.median(by.get("tp1-1t", [float("nan")]))
print("| configuration | ranks x threads | decode tok/s (median) | vs tp=1, 1 thread |")
print("| --- | --- | ---: | ---: |")
for name, v in by.items():
    m = statistics.median(v)
    print(f"| {name} | {name.split('-')[0]} x {name.split('-')[1]} | {m:.1f} | {m / base:.2f}x |")
print(f"tp-scaling: {len(by)} configurations, {sum(len(v) for v in by.values())} runs")
PY
rm -f "$model"
