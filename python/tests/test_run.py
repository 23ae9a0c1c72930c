"""keyer.run equals the keyer command's main job on the sample clip (frames written as PNG,
so the comparison is of pixels, not of an encoder's bytes); progress and statistics."""
import os
import subprocess

import numpy as np
import pytest

import keyer


def frames(directory):
    names = sorted(n for n in os.listdir(directory) if n.endswith(".png"))
    return [keyer.read_image(os.path.join(directory, n)) for n in names]


def test_run_equals_cli(keyer_bin, data, tmp_path):
    clip = str(data / "sample_hevc.mp4")
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    subprocess.run([keyer_bin, clip, "-o", str(tmp_path / "cli" / "f_%03d.png"), "--device",
                    "cpu", "--blur", "16", "--feather", "2", "--threads", "1", "-q"],
                   check=True, capture_output=True)
    calls = []
    stats = keyer.run(clip, str(tmp_path / "py" / "f_%03d.png"), device="cpu", blur=16,
                      feather=2, threads=1, progress=calls.append, progress_interval=0.01)
    cli, py = frames(tmp_path / "cli"), frames(tmp_path / "py")
    assert len(cli) == 24 and len(py) == 24
    for a, b in zip(cli, py):
        assert np.array_equal(a, b)
    assert stats["frames_written"] == 24 and stats["frames_read"] == 24
    assert stats["device"] == "cpu" and stats["model"] in ("selfie", "selfie-landscape")
    assert stats["streams"][0]["frames_written"] == 24
    assert {s["name"] for s in stats["stages"]} >= {"read", "infer", "write"}
    assert calls and calls[-1]["frames_total"] == 24


def test_run_mask_to_video_and_stats_file(data, tmp_path):
    out = tmp_path / "mask.mp4"
    stats = keyer.run(str(data / "sample_hevc.mp4"), out, mask=True, device="cpu",
                      stats=str(tmp_path / "s.json"), threshold=0.4, smooth=0)
    assert out.stat().st_size > 0 and (tmp_path / "s.json").stat().st_size > 0
    assert stats["frames_written"] == 24
    with pytest.raises(keyer.InputOutputError, match="exists"):
        keyer.run(str(data / "sample_hevc.mp4"), out, mask=True)


def test_run_progress_can_stop(data, tmp_path):
    def stop(p):
        return False
    with pytest.raises(keyer.CancelledError):
        keyer.run(str(data / "sample_hevc.mp4"), tmp_path / "x.mp4", device="cpu",
                  progress=stop, progress_interval=0.001)


def test_run_progress_exception_propagates(data, tmp_path):
    class Boom(Exception):
        pass

    def boom(p):
        raise Boom("from the callback")
    with pytest.raises(Boom, match="from the callback"):
        keyer.run(str(data / "sample_hevc.mp4"), tmp_path / "x.mp4", device="cpu",
                  progress=boom, progress_interval=0.001)


def test_run_errors(data, tmp_path):
    with pytest.raises(keyer.InputOutputError, match="missing.mp4"):
        keyer.run(str(tmp_path / "missing.mp4"), tmp_path / "o.mp4")
    with pytest.raises(keyer.InvalidArgumentError, match="unknown option 'bogus'"):
        keyer.run(str(data / "sample_hevc.mp4"), tmp_path / "o.mp4", bogus=1)
    with pytest.raises(keyer.InvalidArgumentError, match="option batch"):
        keyer.run(str(data / "sample_hevc.mp4"), tmp_path / "o.mp4", batch=65)
    with pytest.raises(keyer.InvalidArgumentError, match="no output"):
        keyer.run(str(data / "sample_hevc.mp4"))
