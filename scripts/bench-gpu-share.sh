#!/usr/bin/env bash
# The share of the GPU's kernel time that each part of keyer takes in the main job, for issue
# 27's "the infer stage's share of the GPU time halves against f32". Runs the job once per
# precision with a CUPTI activity tracer injected into it (scripts/gpu-kernel-times.c, built here
# with the CUDA toolkit's libcupti; CUDA_INJECTION64_PATH, no change to keyer), which records
# every kernel's start and end without serialising or replaying kernels, so the job runs at
# nearly its own speed and forms its own batches (under Nsight Compute, which this script used
# before, the batches fell to about one frame). Sums the kernels' durations by the source folder
# that defines each kernel: src/nn/ (the models: the infer, detect and mesh stages), src/render/
# (prepare, refine, composite), src/vision/, src/overlay/, src/io/, src/core/. Kernels of
# different streams overlap in the job, so a kernel's duration includes the time it shared the
# GPU; NVDEC's decoding is not a kernel and is not in the sums.
#
# usage: scripts/bench-gpu-share.sh KEYER INPUT STREAMS [PRECISION...]   (default: f32 auto)
#   KEYER: the keyer program; INPUT: a video; STREAMS: how many copies of it run together.
# Prints, per precision, each folder's kernel count, milliseconds and share, the infer share, the
# same from the first kernel outside src/nn on (the frames, without the runtimes' set-up runs: a
# checked run and a warm run per batch size), the src/nn kernels that took the most time (name,
# count, ms), the job's frames/s, and the model's schedule per batch size and the batches the
# job formed (--stats).
set -euo pipefail
keyer=$1 input=$2 streams=$3; shift 3
precisions=("$@"); [ ${#precisions[@]} -gt 0 ] || precisions=(f32 auto)
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cuda=${CUDA_HOME:-/usr/local/cuda}
cupti=""
for d in "$cuda/extras/CUPTI/lib64" "$cuda/lib64" "$cuda/lib" "$cuda/targets/x86_64-linux/lib"; do
  [ -e "$d/libcupti.so" ] && { cupti=$d; break; }
done
[ -n "$cupti" ] || { echo "bench-gpu-share: no libcupti.so under $cuda"; exit 1; }
inc=$cuda/include; [ -e "$cuda/extras/CUPTI/include/cupti.h" ] && inc="$cuda/extras/CUPTI/include -I$cuda/include"
# shellcheck disable=SC2086
cc -shared -fPIC -O2 -I$inc "$root/scripts/gpu-kernel-times.c" -L"$cupti" -lcupti \
   -Wl,-rpath,"$cupti" -o "$tmp/libkt.so"
ins=(); for _ in $(seq "$streams"); do ins+=("$input"); done
for p in "${precisions[@]}"; do
  CUDA_INJECTION64_PATH="$tmp/libkt.so" KEYER_KERNEL_TIMES="$tmp/$p.tsv" \
      "$keyer" "${ins[@]}" --device cuda --blur --precision "$p" --stats "$tmp/$p.json" -q -y >"$tmp/$p.log" 2>&1 ||
    { echo "precision $p: the run failed:"; tail -5 "$tmp/$p.log"; exit 1; }
  grep -h "gpu-kernel-times" "$tmp/$p.log" | head -3 || true
  python3 - "$root" "$tmp/$p.tsv" "$p" "$tmp/$p.json" <<'PY'
import json, os, re, shutil, subprocess, sys
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
rows = []
for line in open(path):
    parts = line.rstrip("\n").split("\t")
    if len(parts) == 3:
        rows.append((int(parts[0]), int(parts[1]), parts[2]))
rows.sort()
# the mangled names' function names: c++filt where it exists, else the first <length><name>
names = sorted({r[2] for r in rows})
plain = {}
if shutil.which("c++filt"):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    plain = dict(zip(names, out))
def base(n):
    d = plain.get(n, n)
    if d.startswith("_Z"):
        m = re.match(r"_ZN?L?(\d+)", d)
        return d[m.end():m.end() + int(m.group(1))] if m else d
    d = re.sub(r"\(.*$", "", d)           # parameters
    while "<" in d:                        # template arguments
        d2 = re.sub(r"<[^<>]*>", "", d)
        if d2 == d:
            break
        d = d2
    d = d.split()[-1] if d.split() else d  # a return type before it
    return d.split("::")[-1]
tot, cnt, fr_tot, fr_cnt, in_frames = {}, {}, {}, {}, False
nn_names, nn_ns = {}, {}  # the src/nn kernels by name: count and time
for start, end, mangled in rows:
    name = base(mangled)
    part = where.get(name, "other (" + name + ")" if name else "other")
    ns = float(end - start)
    tot[part] = tot.get(part, 0.0) + ns
    cnt[part] = cnt.get(part, 0) + 1
    if part == "nn":
        nn_names[name] = nn_names.get(name, 0) + 1
        nn_ns[name] = nn_ns.get(name, 0.0) + ns
    # the frames: from the first kernel outside src/nn on (the runtimes' set-up comes before)
    in_frames = in_frames or part != "nn"
    if in_frames:
        fr_tot[part] = fr_tot.get(part, 0.0) + ns
        fr_cnt[part] = fr_cnt.get(part, 0) + 1
all_ns = sum(tot.values())
print(f"precision {prec}: {sum(cnt.values())} kernels, {all_ns / 1e6:.2f} ms of kernel time")
for part in sorted(tot, key=lambda k: -tot[k])[:8]:
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
    print(f"  {d.get('fps', 0):.0f} frames/s; model {d.get('model', '?')} {d.get('model_precision', '?')}: "
          f"schedule {d.get('model_schedule', '?')}; {b.get('count', '?')} batches, "
          f"{b.get('mean_frames', 0):.2f} frames each; {d.get('frames_people', 0)} frames keyed by people")
except (OSError, ValueError) as e:
    print(f"  no statistics: {e}")
PY
done
