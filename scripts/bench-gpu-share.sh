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
# Prints, per precision, each folder's kernel count, milliseconds and share, the infer share, the
# same from the first kernel outside src/nn on (the frames, without the runtimes' set-up runs: a
# checked run and a warm run per batch size), the src/nn kernels that took the most time (name,
# count, ms), and the model's schedule per batch size and the batches the job formed (--stats).
# ncu's kernel times are of each kernel alone with cold caches and base clocks (its defaults), so
# they are larger than in the job itself; the shares are what the script is for.
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
  python3 - "$root" "$tmp/$p.csv" "$p" "$tmp/$p.json" <<'PY'
import csv, json, os, re, sys
root, path, prec, stats = sys.argv[1:5]
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
nn_names, nn_ns = {}, {}  # the src/nn kernels by name: count and time
# the frames' share: from the first kernel outside src/nn on (the runtimes' set-up, a checked run
# and a warm run per batch size, comes before the first frame is prepared)
fr_tot, fr_cnt, in_frames = {}, {}, False
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = re.split(r"[<(\s]", row["Kernel Name"].strip())[0]
    part = where.get(name, "other (" + name + ")" if name else "other")
    ns = float(row["Metric Value"].replace(",", ""))
    tot[part] = tot.get(part, 0.0) + ns
    cnt[part] = cnt.get(part, 0) + 1
    if part == "nn":
        nn_names[name] = nn_names.get(name, 0) + 1
        nn_ns[name] = nn_ns.get(name, 0.0) + ns
    in_frames = in_frames or part != "nn"
    if in_frames:
        fr_tot[part] = fr_tot.get(part, 0.0) + ns
        fr_cnt[part] = fr_cnt.get(part, 0) + 1
all_ns = sum(tot.values())
print(f"precision {prec}: {sum(cnt.values())} kernels, {all_ns / 1e6:.2f} ms of kernel time")
for part in sorted(tot, key=lambda k: -tot[k]):
    print(f"  {part:24s} {cnt[part]:7d} kernels {tot[part] / 1e6:9.2f} ms {100 * tot[part] / all_ns:6.1f}%")
print(f"  infer share (src/nn): {100 * tot.get('nn', 0.0) / all_ns:.1f}%" if all_ns else "  no kernels")
fr_ns = sum(fr_tot.values())
if fr_ns:
    print(f"  frames only (from the first kernel outside src/nn): {sum(fr_cnt.values())} kernels, "
          f"{fr_ns / 1e6:.2f} ms, src/nn {fr_cnt.get('nn', 0)} kernels {fr_tot.get('nn', 0.0) / 1e6:.2f} ms, "
          f"infer share {100 * fr_tot.get('nn', 0.0) / fr_ns:.1f}%")
top = sorted(nn_names, key=lambda k: -nn_ns[k])[:6]
print("  src/nn kernels by time: " + ", ".join(f"{k} {nn_names[k]}x {nn_ns[k] / 1e6:.2f} ms" for k in top))
try:  # the schedule per batch size and the batches the job formed (--stats)
    d = json.load(open(stats))
    b = d.get("batches", {})
    print(f"  model {d.get('model', '?')} {d.get('model_precision', '?')}: schedule {d.get('model_schedule', '?')}; "
          f"{b.get('count', '?')} batches, {b.get('mean_frames', 0):.2f} frames each; "
          f"{d.get('frames_people', 0)} frames keyed by people")
except (OSError, ValueError) as e:
    print(f"  no statistics: {e}")
PY
done
