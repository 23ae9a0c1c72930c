"""keyer.run against the keyer command on the same job, alternating, best of N rounds:

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_run.py [INPUT] [--rounds 5]

The job: INPUT (default tests/data/sample_hevc.mp4) blurred on the CPU into an .mp4 in a
temporary directory. Wall time of the whole call (the command: the process, as a user runs
it; Python: the keyer.run call in an already started interpreter).
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import keyer

REPO = pathlib.Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input", nargs="?", default=str(REPO / "tests" / "data" / "sample_hevc.mp4"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keyer", default=os.environ.get("KEYER_BIN", str(REPO / "build" / "keyer")))
    a = ap.parse_args()
    cli, py = [], []
    with tempfile.TemporaryDirectory() as d:
        for r in range(a.rounds):
            t0 = time.perf_counter()
            subprocess.run([a.keyer, a.input, "-o", os.path.join(d, "cli.mp4"), "--device", "cpu",
                            "-y", "-q"], check=True)
            cli.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            stats = keyer.run(a.input, os.path.join(d, "py.mp4"), device="cpu", overwrite=True)
            py.append(time.perf_counter() - t0)
            print("round %d: keyer %.3f s, keyer.run %.3f s (%d frames)"
                  % (r, cli[-1], py[-1], stats["frames_written"]))
    print("best: keyer %.3f s, keyer.run %.3f s; Python / command = %.3f"
          % (min(cli), min(py), min(py) / min(cli)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
