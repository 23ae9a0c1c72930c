#!/usr/bin/env python3
"""Per device function totals of an Nsight Compute source-counter export of the persistent kernel.

The persistent kernel (src/nn/cuda/persistent/persistent.cu) is one __global__ function whose
steps are __noinline__ device functions; ncu's source page lists SASS addresses of the whole
kernel. This groups them by the device function that holds each address (from the cubin's symbol
table) and prints, per function: SASS instructions, those executed at least once, warp stall
samples, the samples waiting for instructions (stall_no_inst) and at barriers, and the three
largest stall reasons. The numbers of docs/notes/cuda-persistent-schedule.md's "where the time
goes by ncu" came from it.

On the GPU machine (tree built in build-dev):
  ncu --section SourceCounters --section WarpStateStats --kernel-name-base mangled \\
      -k regex:persistent_kernelI6__half --launch-skip 10 --launch-count 1 -o rep \\
      build-dev/bench/bench_nn_cuda --models selfie --batches 1 --seconds 0.02 --schedule persistent
  ncu --import rep.ncu-rep --page source --csv --print-source sass | gzip > src.csv.gz
  cuobjdump -xelf all $(find build-dev -name persistent.cu.o)     # -> persistent.sm_90.cubin
Then here:  scripts/ncu-by-function.py src.csv.gz persistent.sm_90.cubin [f16|f32]
(readelf, from binutils, reads the cubin.)
"""
import csv
import gzip
import subprocess
import sys


def functions(cubin, kernel):
    """(start, size, name) of the device functions inside @kernel's text section."""
    sections = subprocess.run(["readelf", "-SW", cubin], capture_output=True, text=True).stdout
    index = next(line.split("]")[0].split("[")[1].strip() for line in sections.splitlines()
                 if line.split("]")[-1].split()[:1] == [".text." + kernel])
    out = subprocess.run(["readelf", "-sW", cubin], capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        # value, size, type, bind, vis, section index, name ($<kernel>$<function> for ours)
        if len(f) >= 8 and f[3] == "FUNC" and f[6] == index and f[7] != kernel:
            syms.append((int(f[1], 16), int(f[2]), f[7].split("$")[-1]))
    return syms


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    export, cubin = sys.argv[1], sys.argv[2]
    prec = sys.argv[3] if len(sys.argv) > 3 else "f16"
    kernel = "_Z17persistent_kernelI6__halfEvPK12kr_cuda_stepiPx" if prec == "f16" else \
        "_Z17persistent_kernelIfEvPK12kr_cuda_stepiPx"
    opener = gzip.open if export.endswith(".gz") else open
    rows = list(csv.reader(opener(export, "rt")))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr, data = rows[header], [r for r in rows[header + 1:] if r and r[0].startswith("0x")]
    col = {name: i for i, name in enumerate(hdr)}
    stalls = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    syms = functions(cubin, kernel)
    base = int(data[0][col["Address"]], 16)

    def num(r, i):
        return int(r[i].replace(",", "") or 0)

    totals = {}
    for r in data:
        off = int(r[col["Address"]], 16) - base
        name = next((n for s, z, n in syms if s <= off < s + z), "(kernel body)")
        t = totals.setdefault(name, {"instr": 0, "exec": 0, "samples": 0, "stalls": [0] * len(stalls)})
        t["instr"] += 1
        t["exec"] += num(r, col["Instructions Executed"]) > 0
        t["samples"] += num(r, col["Warp Stall Sampling (All Samples)"])
        for k, i in enumerate(stalls):
            t["stalls"][k] += num(r, i)
    names = [hdr[i][len("stall_"):] for i in stalls]
    all_samples = sum(t["samples"] for t in totals.values()) or 1
    print(f"{'function':44s} {'instr':>6s} {'exec':>6s} {'samples':>8s} {'%':>5s} {'no_inst':>7s} "
          f"{'barrier':>7s}  top stalls")
    for name, t in sorted(totals.items(), key=lambda kv: -kv[1]["samples"]):
        if not t["samples"] and not t["exec"]:
            continue
        s = dict(zip(names, t["stalls"]))
        total = sum(t["stalls"]) or 1
        top = sorted(s.items(), key=lambda kv: -kv[1])[:3]
        print(f"{name[:44]:44s} {t['instr']:6d} {t['exec']:6d} {t['samples']:8d} "
              f"{100 * t['samples'] / all_samples:5.1f} {s.get('no_inst', 0):7d} {s.get('barrier', 0):7d}  "
              + ", ".join(f"{n} {100 * v / total:.0f}%" for n, v in top))
    executed = sum(t["exec"] for t in totals.values())
    print(f"executed: {executed} distinct instructions ({executed * 16 / 1024:.1f} KB); "
          f"warp samples: {all_samples}")


if __name__ == "__main__":
    main()
