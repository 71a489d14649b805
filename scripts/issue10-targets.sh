#!/usr/bin/env bash
# Measures issue 10's targets on this box: `verity bench` over every
# configuration, interleaved round by round (so a slow minute of the shared
# box hits every configuration alike), then the median of each field per
# configuration and the ratios the targets are stated in.
#
#   scripts/issue10-targets.sh [ROUNDS]     (default 3; about 1.5 min a round; VERITY=path: another binary)
#
# The ~110M model is `verity synth` with issue 10's shape and a 1024-token
# context (512-token prompts), written once into .verity/models/.
#
# "of read BW" is against the cached roofline (the best pass this box ever
# showed); "of probe" against the mean of the `verity roofline --probe`s taken
# just before and just after that run, over the runs whose two probes agree
# within 10% (n/N says how many); "with KV" counts the KV cache each decoded
# token also reads; "jobs split" is the share of the thread pool's jobs shared
# over the threads (the rest ran on one) (this box's bandwidth moves by 2x with its
# neighbours, so a run and the cached best may be minutes and neighbours apart).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
v=${VERITY:-build/cli/verity}  # VERITY=path runs another build (one carried to another machine)
big=.verity/models/synth-110m-ctx1024.bin
small=models/stories260K.bin
out=out/issue10-targets
mkdir -p "$out" "$(dirname "$big")"
[ -f "$big" ] || "$v" synth --out "$big" --config \
  '{"dim":768,"hidden_dim":2048,"n_layers":12,"n_heads":12,"n_kv_heads":4,"vocab_size":32000,"seq_len":1024,"shared_classifier":false}'
"$v" roofline --json > "$out/roofline.json"

# name|model|threads|dtype|prompt|gen
configs=(
  "110m-f32-1t|$big|1|f32|512|32"   "110m-f32-2t|$big|2|f32|512|32"
  "110m-bf16-1t|$big|1|bf16|512|32" "110m-bf16-2t|$big|2|bf16|512|32"
  "110m-q8-1t|$big|1|q8_0|512|32"   "110m-q8-2t|$big|2|q8_0|512|32"
  "260k-f32-1t|$small|1|f32|64|64"  "260k-f32-2t|$small|2|f32|64|64"
)
: > "$out/records.jsonl"
# A probe (about half a second) before the first run and after every run: a
# run's "of probe" is against the mean of the probes on either side of it,
# taken seconds apart, since this box's free bandwidth changes by the minute.
seq=0
probe() {
  local p
  p=$("$v" roofline --probe --json --buffer-mb 512 --repetitions 5 2>/dev/null)
  echo "{\"config\":\"probe\",\"round\":$1,\"seq\":$seq,\"record\":$p}" >> "$out/records.jsonl"
}
for r in $(seq 1 "$rounds"); do
  probe "$r"
  for c in "${configs[@]}"; do
    IFS='|' read -r name model threads dtype prompt gen <<< "$c"
    rec=$("$v" bench --model "$model" --threads "$threads" --dtype "$dtype" --prompt-tokens "$prompt" \
          --gen-tokens "$gen" --min-seconds 2 --output json 2>/dev/null)
    echo "{\"config\":\"$name\",\"round\":$r,\"seq\":$seq,\"record\":$rec}" >> "$out/records.jsonl"
    seq=$((seq + 1))
    probe "$r"
    echo "round $r $name: $(echo "$rec" | /usr/bin/python3 -c 'import json,sys; m=json.load(sys.stdin)["metrics"]; print("decode %.1f tok/s, prefill %.1f tok/s" % (m["decode_tok_s"], m["prefill_tok_s"]))')"
  done
done
/usr/bin/python3 - "$out/records.jsonl" "$out/roofline.json" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
roof = json.load(open(sys.argv[2]))
by = {}
probes = {}  # seq -> threads -> best GB/s of the probe taken then (before run seq, after run seq - 1)
for r in recs:
    if r["config"] == "probe":
        probes[r["seq"]] = {p["threads"]: p["best"] for p in r["record"]["read_gb_s"]}
        continue
    r["record"]["_round"] = r["round"]
    r["record"]["_seq"] = r["seq"]
    by.setdefault(r["config"], []).append(r["record"])
def adjacent(x):
    """The mean of the probes just before and just after run x at its thread
    count; None when either is missing or they differ by more than 10% (the
    box changed during the run, and neither probe says what the run met)."""
    t, k = x["threads"], x["_seq"]
    if t not in probes.get(k, {}) or t not in probes.get(k + 1, {}):
        return None
    a, b = probes[k][t], probes[k + 1][t]
    return (a + b) / 2 if abs(a - b) <= 0.1 * max(a, b) else None
med = lambda xs: statistics.median(xs)
row = {}
print("\n| config | decode tok/s | GB/s | of read BW | of probe | of probe with KV | prefill tok/s | prefill GFLOP/s | prefill/decode | peak RSS MiB | jobs split |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, rs in by.items():
    d = med([x["metrics"]["decode_tok_s"] for x in rs]); p = med([x["metrics"]["prefill_tok_s"] for x in rs])
    g = med([x["metrics"]["prefill_gflops"] for x in rs]); rss = med([x["metrics"]["peak_rss_mb"] for x in rs])
    gb = med([x["roofline"]["achieved_gb_s"] for x in rs]); fr = [x["roofline"]["fraction"] for x in rs if x["roofline"]["fraction"]]
    pr = [x["roofline"]["achieved_gb_s"] / adjacent(x) for x in rs if adjacent(x)]
    # With the KV cache each token reads (bench records since session 6).
    pk = [x["roofline"]["achieved_gb_s_with_kv"] / adjacent(x) for x in rs
          if adjacent(x) and x["roofline"].get("achieved_gb_s_with_kv")]
    # The share of the pool's jobs that were split over the threads (null on 1 thread).
    sp = [x["pool"]["split_jobs"] / max(1, x["pool"]["split_jobs"] + x["pool"]["caller_jobs"]) for x in rs if x.get("pool")]
    row[name] = dict(d=d, p=p)
    frs = f"{100*med(fr):.1f}%" if fr else "-"
    prs = f"{100*med(pr):.1f}% ({len(pr)}/{len(rs)})" if pr else f"- (0/{len(rs)})"
    pks = f"{100*med(pk):.1f}%" if pk else "-"
    sps = f"{100*med(sp):.1f}%" if sp else "-"
    print(f"| {name} | {d:.1f} | {gb:.2f} | {frs} | {prs} | {pks} | {p:.1f} | {g:.2f} | {p/d:.1f}x | {rss:.0f} | {sps} |")
print()
# Each ratio per round too (the configurations of one round ran minutes
# apart at most), and the median of those: the ratio of the medians above
# mixes rounds whose box differed.
def per_round(num, den):
    d = {x["_round"]: x["metrics"]["decode_tok_s"] for x in by.get(den, [])}
    return [x["metrics"]["decode_tok_s"] / d[x["_round"]] for x in by.get(num, []) if x["_round"] in d]
for t in ("1t", "2t"):
    f = row.get(f"110m-f32-{t}")
    if f:
        print(f"{t}: bf16/f32 decode {row[f'110m-bf16-{t}']['d']/f['d']:.2f}x, q8_0/f32 {row[f'110m-q8-{t}']['d']/f['d']:.2f}x, prefill/decode (f32, 512-token prompt) {f['p']/f['d']:.1f}x")
        for dt in ("bf16", "q8"):
            rr = per_round(f"110m-{dt}-{t}", f"110m-f32-{t}")
            if rr:
                print(f"{t}: {dt}/f32 per round {' / '.join(f'{x:.2f}' for x in rr)}, median {med(rr):.2f}x")
for m in ("110m-f32", "110m-bf16", "110m-q8", "260k-f32"):
    if f"{m}-1t" in row: print(f"{m}: 2 threads / 1 thread decode {row[m+'-2t']['d']/row[m+'-1t']['d']:.2f}x")
print(f"roofline read GB/s: {[(p['threads'], round(p['best'],2)) for p in roof['read_gb_s']]}" if 'read_gb_s' in roof else json.dumps(roof)[:300])
for t in sorted({t for p in probes.values() for t in p}):
    v = [p[t] for _, p in sorted(probes.items()) if t in p]
    print(f"probes at {t} thread(s), in order (GB/s): {' '.join(f'{b:.1f}' for b in v)}")
PY
