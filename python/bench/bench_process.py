"""Overhead of keyer.Keyer.process from Python against the same work from C.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_process.py \
        [--frames 100] [--threads 2] [--c build/python/bench_python_process]

Makes a 1280x720 RGB frame (messi5.jpg tiled), then times per frame, one after the other in
the same process order: the C program (python/bench/process_c.c: the chain the extension
calls, into preallocated frames) and Keyer.process(frame, out) with the same model (selfie),
effect (blur), threads and frame. Prints the medians and the ratio.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import keyer

REPO = pathlib.Path(__file__).resolve().parents[2]


def frame_720p():
    img = keyer.read_image(REPO / "tests" / "data" / "messi5.jpg")
    reps = (-(-720 // img.shape[0]), -(-1280 // img.shape[1]), 1)
    return np.ascontiguousarray(np.tile(img, reps)[:720, :1280])


def python_ms(frame, frames, threads):
    out = np.empty_like(frame)
    with keyer.Keyer(threads=threads) as k:
        for _ in range(3):
            k.process(frame, out)
        ms = []
        for _ in range(frames):
            t0 = time.perf_counter()
            k.process(frame, out)
            ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), statistics.fmean(ms), min(ms)


def c_ms(exe, frame, frames, threads):
    with tempfile.NamedTemporaryFile(suffix=".rgb") as f:
        f.write(frame.tobytes())
        f.flush()
        r = subprocess.run([exe, f.name, "1280", "720", str(frames), str(threads)],
                           check=True, capture_output=True, text=True)
    # "per-frame ms: median M mean A min N"
    w = r.stdout.split()
    return float(w[3]), float(w[5]), float(w[7])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternating C / Python rounds")
    ap.add_argument("--c", default=os.environ.get("KEYER_PYTHON_BENCH_C",
                                                  str(REPO / "build" / "python" /
                                                      "bench_python_process")))
    a = ap.parse_args()
    frame = frame_720p()
    cs, ps = [], []
    for r in range(a.rounds):
        cs.append(c_ms(a.c, frame, a.frames, a.threads))
        ps.append(python_ms(frame, a.frames, a.threads))
        print("round %d: C median %.2f ms, Python median %.2f ms" % (r, cs[-1][0], ps[-1][0]))
    c_best = min(c[0] for c in cs)
    p_best = min(p[0] for p in ps)
    print("720p blur, selfie, %d threads, %d frames x %d rounds: C %.2f ms, Python %.2f ms "
          "per frame (best median of the rounds); Python / C = %.3f"
          % (a.threads, a.frames, a.rounds, c_best, p_best, p_best / c_best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
