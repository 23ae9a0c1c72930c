#!/usr/bin/env bash
# The share of the GPU's kernel time that each part of keyer takes in the main job, for issue
# 27's "the infer stage's share of the GPU time halves against f32". Runs the job once per
# precision under Nsight Compute (ncu, from the CUDA toolkit), which times every kernel on its
# own (gpu__time_duration, kernels serialised: the sum is the GPU time the work needs, without
# overlap), and sums the times by the source folder that defines each kernel: src/nn/ (the
# models: the infer, detect and mesh stages), src/render/ (prepare, refine, composite),
# src/vision/, src/overlay/, src/io/, src/core/. NVDEC's decoding is not a kernel and is not in
# the sums. ncu makes the run many times slower: use a short input.
#
# usage: scripts/bench-gpu-share.sh KEYER INPUT STREAMS [PRECISION...]   (default: f32 auto)
#   KEYER: the keyer program; INPUT: a video; STREAMS: how many copies of it run together.
# Prints, per precision, each folder's kernel count, milliseconds and share, and the infer share.
set -euo pipefail
keyer=$1 input=$2 streams=$3; shift 3
precisions=("$@"); [ ${#precisions[@]} -gt 0 ] || precisions=(f32 auto)
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ins=(); for _ in $(seq "$streams"); do ins+=("$input"); done
for p in "${precisions[@]}"; do
  ncu --metrics gpu__time_duration.sum --csv --print-units base --print-kernel-base function \
      --target-processes all --log-file "$tmp/$p.csv" \
      "$keyer" "${ins[@]}" --device cuda --blur --precision "$p" --stats "$tmp/$p.json" -q -y >"$tmp/$p.log" 2>&1 ||
    { echo "precision $p: the run failed:"; tail -5 "$tmp/$p.log"; exit 1; }
  python3 - "$root" "$tmp/$p.csv" "$p" <<'PY'
import csv, os, re, sys
root, path, prec = sys.argv[1:4]
# kernel name -> the folder under src/ whose .cu file defines it
where = {}
pat = re.compile(r"__global__\s+(?:static\s+)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
for d, _, files in os.walk(os.path.join(root, "src")):
    for f in files:
        if f.endswith((".cu", ".cuh")):
            rel = os.path.relpath(d, os.path.join(root, "src")).split(os.sep)[0]
            for m in pat.finditer(open(os.path.join(d, f), errors="replace").read()):
                where.setdefault(m.group(1), set()).add(rel)
where = {k: "|".join(sorted(v)) for k, v in where.items()}  # a name two folders use: both
lines = [l for l in open(path) if l.startswith('"')]
tot, cnt = {}, {}
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = re.split(r"[<(\s]", row["Kernel Name"].strip())[0]
    part = where.get(name, "other (" + name + ")" if name else "other")
    ns = float(row["Metric Value"].replace(",", ""))
    tot[part] = tot.get(part, 0.0) + ns
    cnt[part] = cnt.get(part, 0) + 1
all_ns = sum(tot.values())
print(f"precision {prec}: {sum(cnt.values())} kernels, {all_ns / 1e6:.2f} ms of kernel time")
for part in sorted(tot, key=lambda k: -tot[k]):
    print(f"  {part:24s} {cnt[part]:7d} kernels {tot[part] / 1e6:9.2f} ms {100 * tot[part] / all_ns:6.1f}%")
print(f"  infer share (src/nn): {100 * tot.get('nn', 0.0) / all_ns:.1f}%" if all_ns else "  no kernels")
PY
done
