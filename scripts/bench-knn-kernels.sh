#!/usr/bin/env bash
# Where the GPU time of one CUDA kNN graph update goes: bench_knn under Nsight Compute (ncu, from
# the CUDA toolkit), which times every kernel on its own (gpu__time_duration; kernels
# serialised, so the sum is the GPU time of the kernels without launch gaps, copies or the
# host's part). Prints, per kernel, how many ran per update and the median time of one run,
# then the sum per update; set against bench_knn's end-to-end figure it shows what the rest
# (launches, the copies in and out, the synchronisation, the host's staging) costs. The caches
# are left as the update before left them (--cache-control none): a kernel reads what the one
# before it wrote from L2, as it does outside the profiler; clocks are ncu's fixed base clocks.
#
# usage: scripts/bench-knn-kernels.sh BENCH_KNN [N [SET [FRAMES]]]   (default: 5000 uniform 10)
#   BENCH_KNN: the bench_knn program (built with CUDA); SET: uniform, clustered or mixed.
set -euo pipefail
bench=$1 n=${2:-5000} set=${3:-uniform} frames=${4:-10}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ncu --metrics gpu__time_duration.sum --cache-control none --csv --print-units base \
    --print-kernel-base function --log-file "$tmp/k.csv" \
    "$bench" --impl cuda --n "$n" --set "$set" --frames "$frames" >"$tmp/bench.log" 2>&1 ||
    { echo "ncu run failed:"; tail -5 "$tmp/bench.log"; exit 1; }
python3 - "$tmp/k.csv" "$n" "$set" "$frames" <<'PY'
import csv, re, statistics, sys
path, n, set_, frames = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
updates = frames + 2  # bench_knn's two warm-up frames
lines = [l for l in open(path) if l.startswith('"')]
times = {}
order = []
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    raw = row["Kernel Name"].strip()
    name = re.split(r"[<(\s]", re.sub(r"\(anonymous namespace\)::", "", raw))[0]
    name = name.split("::")[-1] or raw
    if name not in times:
        times[name] = []
        order.append(name)
    times[name].append(float(row["Metric Value"].replace(",", "")) / 1e3)  # ns -> us
total = 0.0
print(f"kNN update, n={n} {set_}: kernels of {updates} updates (ncu, serialised)")
for name in order:
    t = times[name]
    per = len(t) / updates
    med = statistics.median(t)
    total += per * med
    print(f"  {name[:34]:34s} {per:5.2f}/update  median {med:8.2f} us  max {max(t):8.2f} us")
print(f"  sum of kernel medians per update: {total:.1f} us")
PY
