#!/usr/bin/env bash
# Registers, stack, spills and static shared memory of every CUDA kernel for every architecture
# keyer is built for, checked against each architecture's limits (the CUDA C++ Programming
# Guide's "Technical Specifications per Compute Capability": 255 registers per thread, 64 K per
# block; 48 KB of static shared memory per block; dynamic shared memory is checked at run time
# against the device's opt-in limit). An H100 runs only its own sm_90 code, also when it
# emulates an older class (KEYER_CUDA_EMULATE_CC), so this is how the other architectures'
# machine code is checked: it must exist for each of them and fit their limits.
#
# Where the numbers come from, first that applies:
#   --lib FILE    cuobjdump (on the GPU machines' CUDA toolkits; not every build machine has
#                 it): `cuobjdump --list-elf FILE` (which architectures the library holds) and
#                 `cuobjdump --dump-resource-usage FILE`. FILE: build*/libkeyer.so. Without
#                 cuobjdump it lists the code objects (ELF and PTX per architecture) of each
#                 translation unit from the .nv_fatbin section and checks every architecture
#                 has ELF in each, but reports no resources.
#   --log FILE    the output of a build configured with -DKEYER_CUDA_RESOURCE_USAGE=ON (nvcc
#                 --resource-usage: ptxas prints each kernel's resources for each architecture).
#   [FILE.cu...]  compiles the files (default: every .cu under src/ and gst/) with nvcc for
#                 each architecture in KEYER_CUDA_ARCHS (default "75 80 86 89 90 100 120"),
#                 KEYER_JOBS at a time (default 2), and reads ptxas' report.
# Prints one line per kernel and architecture, then a summary per architecture; exits 1 when a
# kernel breaks a limit or an architecture has no code. Spills are reported, not failed.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
archs=${KEYER_CUDA_ARCHS:-"75 80 86 89 90 100 120"}
jobs=${KEYER_JOBS:-2}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mode=compile
src=""
case "${1:-}" in
  --lib) mode=lib; src=$2; shift 2 ;;
  --log) mode=log; src=$2; shift 2 ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
esac

if [ "$mode" = lib ]; then
  if ! command -v cuobjdump >/dev/null 2>&1; then
    # Without cuobjdump: the architectures of every CUDA translation unit, read from the
    # library's .nv_fatbin section (fatbin headers: magic 0xBA55ED50, then one entry per code
    # object, kind 1 PTX / 2 ELF, its architecture in the entry header's eighth word).
    echo "check-cuda-resources: cuobjdump is not installed here: listing the code objects from" >&2
    echo "  the .nv_fatbin section instead (resources: --log, or compile mode)" >&2
    objcopy -O binary --only-section=.nv_fatbin "$src" "$work/fatbin.bin"
    "$py" - "$work/fatbin.bin" "$archs" <<'EOF2'
import collections, struct, sys
d = open(sys.argv[1], "rb").read()
want = sys.argv[2].split()
i, units, seen = 0, 0, collections.Counter()
while i + 16 <= len(d):
    magic, _, hs, size = struct.unpack_from("<IHHQ", d, i)
    if magic != 0xBA55ED50:
        i += 8
        continue
    units += 1
    j, end = i + hs, i + hs + size
    while j < end:
        kind, _, ehs, psz = struct.unpack_from("<HHIQ", d, j)
        arch = struct.unpack_from("<I", d, j + 28)[0]
        seen[({1: "PTX", 2: "ELF"}.get(kind, "kind%d" % kind), arch)] += 1
        j += ehs + psz
    i = end
print("%d CUDA translation units (fatbins)" % units)
for (kind, arch), n in sorted(seen.items()):
    print("  %s sm_%d: %d" % (kind, arch, n))
missing = [a for a in want if seen[("ELF", int(a))] != units]
if missing:
    print("missing ELF code for sm_" + ", sm_".join(missing))
sys.exit(1 if missing or not units else 0)
EOF2
    exit $?
  fi
  echo "== cuobjdump --list-elf $src"
  cuobjdump --list-elf "$src" | tee "$work/elf.txt"
  cuobjdump --dump-resource-usage "$src" > "$work/report.txt"
  fmt=cuobjdump
elif [ "$mode" = log ]; then
  cp "$src" "$work/report.txt"
  fmt=ptxas
else
  files=("$@")
  if [ ${#files[@]} -eq 0 ]; then
    mapfile -t files < <(cd "$repo" && find src gst -name '*.cu' | sort)
  fi
  gencode=()
  for a in $archs; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
  echo "compiling ${#files[@]} files for sm_${archs// /, sm_} ($jobs at a time)" >&2
  i=0
  for f in "${files[@]}"; do
    i=$((i + 1))
    ( cd "$repo" && "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr --resource-usage \
        -I src -I include "${gencode[@]}" -c "$f" -o "$work/obj$i.o" > "$work/out$i.txt" 2>&1 \
      || { echo "FAILED: $f" >> "$work/out$i.txt"; } ) &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  done
  wait
  cat "$work"/out*.txt > "$work/report.txt"
  if grep -q '^FAILED: ' "$work/report.txt"; then
    grep -B5 '^FAILED: ' "$work/report.txt" >&2
    exit 1
  fi
  fmt=ptxas
fi

"$py" - "$work/report.txt" "$fmt" "$archs" <<'EOF'
import re, subprocess, sys
path, fmt, archs = sys.argv[1], sys.argv[2], sys.argv[3].split()
text = open(path, errors="replace").read().splitlines()
rows = {}  # (arch, mangled) -> dict
if fmt == "ptxas":
    cur = None
    for line in text:
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+)a?'", line)
        if m:
            cur = (m.group(2), m.group(1))
            rows.setdefault(cur, {"regs": 0, "stack": 0, "spill": 0, "smem": 0})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            rows[cur]["stack"] = int(m.group(1))
            rows[cur]["spill"] = int(m.group(2)) + int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            rows[cur]["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            rows[cur]["smem"] = int(s.group(1)) if s else 0
            cur = None
else:  # cuobjdump --dump-resource-usage
    arch = None
    for line in text:
        m = re.search(r"arch = sm_(\d+)", line)
        if m:
            arch = m.group(1)
        m = re.search(r"Function (\S+):", line)
        if m and arch:
            fn = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)
        if m and arch:
            rows[(arch, fn)] = {"regs": int(m.group(1)), "stack": int(m.group(2)),
                                "smem": int(m.group(3)), "spill": int(m.group(4))}
names = sorted({k[1] for k in rows})
try:
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    demangled = dict(zip(names, out.splitlines()))
except OSError:
    demangled = {n: n for n in names}
def short(n):
    d = demangled.get(n, n)
    d = re.sub(r"\(.*\)$", "", d)  # parameters
    return d if len(d) <= 70 else d[:67] + "..."
bad = 0
print("%-5s %-70s %5s %6s %6s %7s  %s" % ("arch", "kernel", "regs", "stack", "spill", "smem", "check"))
for n in names:
    for a in archs:
        r = rows.get((a, n))
        if r is None:
            continue
        why = []
        if r["regs"] > 255:
            why.append("registers > 255")
        if r["smem"] > 48 * 1024:
            why.append("static shared memory > 48 KB")
        bad += bool(why)
        note = "; ".join(why) if why else ("ok, spills" if r["spill"] else "ok")
        print("sm_%-2s %-70s %5d %6d %6d %7d  %s" % (a, short(n), r["regs"], r["stack"], r["spill"], r["smem"], note))
print()
print("per architecture: kernels, most registers, kernels with spills, most static shared memory")
for a in archs:
    ks = [r for (aa, n), r in rows.items() if aa == a]
    if not ks:
        print("sm_%s: NO CODE" % a)
        bad += 1
        continue
    print("sm_%s: %d kernels, %d registers at most, %d with spills, %d bytes static shared memory at most"
          % (a, len(ks), max(r["regs"] for r in ks), sum(1 for r in ks if r["spill"]),
             max(r["smem"] for r in ks)))
sys.exit(1 if bad else 0)
EOF
