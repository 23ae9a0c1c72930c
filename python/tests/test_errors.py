"""Errors raise the keyer.Error subclass of their status, carrying keyer's message."""
import numpy as np
import pytest

import keyer


@pytest.fixture(scope="module")
def k():
    with keyer.Keyer(temporal="off", threads=1) as k:
        yield k


def test_error_classes():
    assert issubclass(keyer.InvalidArgumentError, keyer.Error)
    assert issubclass(keyer.InvalidArgumentError, ValueError)
    assert issubclass(keyer.InputOutputError, OSError)
    assert issubclass(keyer.OutOfMemoryError, MemoryError)
    for cls in (keyer.BadDataError, keyer.UnsupportedError, keyer.DeviceError,
                keyer.CancelledError, keyer.InternalError):
        assert issubclass(cls, keyer.Error)


def test_missing_model_file(tmp_path):
    with pytest.raises(keyer.InputOutputError) as e:
        keyer.Keyer(model=str(tmp_path / "missing.tflite"))
    assert "missing.tflite: model file not found" in str(e.value)
    assert e.value.status == "I/O error" and e.value.message == str(e.value)


def test_bad_model(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"this is not a flatbuffer" * 10)
    with pytest.raises(keyer.BadDataError) as e:
        keyer.Keyer(model=str(bad))
    assert "bad.tflite" in e.value.message


def test_unknown_model_and_not_segmentation():
    with pytest.raises(keyer.InvalidArgumentError, match="unknown model 'nope'"):
        keyer.Keyer(model="nope")
    with pytest.raises(keyer.InvalidArgumentError, match="face-short: not a segmentation"):
        keyer.Keyer(model="face-short")


def test_options_errors():
    with pytest.raises(keyer.InvalidArgumentError, match="unknown option 'no_such'"):
        keyer.Keyer(no_such=1)
    with pytest.raises(keyer.InvalidArgumentError, match="option feather"):
        keyer.Keyer(feather=-5)
    with pytest.raises(keyer.InvalidArgumentError, match="option temporal"):
        keyer.Keyer(temporal="sometimes")
    with pytest.raises(keyer.InvalidArgumentError, match="format 'yuv'"):
        keyer.Keyer(format="yuv")
    if not keyer.built_with_cuda():
        with pytest.raises(keyer.UnsupportedError, match="built without CUDA"):
            keyer.Keyer(device="cuda")
    with pytest.raises(keyer.InvalidArgumentError, match="needs a background"):
        keyer.Keyer(effect="image")


@pytest.mark.parametrize("frame,match", [
    (np.zeros((48, 64, 3), np.float32), "elements must be uint8, not float32"),
    (np.zeros((48, 64, 3), np.uint16), "elements must be uint8, not uint16"),
    (np.zeros((48, 64, 2), np.uint8), r"takes \(height, width, 3\) arrays, got 2 channels"),
    (np.zeros((48, 64), np.uint8), "got 2 dimensions"),
    (np.zeros((4, 48, 64, 3), np.uint8), "expected 2 or 3 dimensions"),
    (np.zeros((48, 128, 3), np.uint8)[:, ::2], "pixels must be contiguous within each row"),
    (np.zeros((64, 48, 3), np.uint8).transpose(1, 0, 2), "pixels must be contiguous"),
    (np.zeros((48, 64, 3), np.uint8)[::-1], "rows at a positive stride"),
    ("not an array", "not a"),
])
def test_bad_frames(k, frame, match):
    with pytest.raises(keyer.InvalidArgumentError, match=match) as e:
        k.process(frame)
    assert e.value.status == "invalid argument"


def test_bad_out_and_matte(k):
    frame = np.zeros((48, 64, 3), np.uint8)
    with pytest.raises(keyer.InvalidArgumentError, match=r"out: expected shape \(48, 64, 3\)"):
        k.process(frame, np.zeros((48, 64, 4), np.uint8))
    ro = np.zeros((48, 64, 3), np.uint8)
    ro.flags.writeable = False
    with pytest.raises(keyer.InvalidArgumentError, match="out: not a writable"):
        k.process(frame, ro)
    with pytest.raises(keyer.InvalidArgumentError, match=r"matte: expected shape \(48, 64\)"):
        k.process(frame, matte=np.zeros((48, 65), np.uint8))


def test_bad_nv12():
    with keyer.Keyer(format="nv12", threads=1) as k:
        y = np.zeros((48, 64), np.uint8)
        with pytest.raises(keyer.InvalidArgumentError, match="uv plane"):
            k.process((y, np.zeros((24, 31, 2), np.uint8)))
        with pytest.raises(keyer.InvalidArgumentError, match="even sizes"):
            k.process(np.zeros((71, 64), np.uint8))
        with pytest.raises(keyer.InvalidArgumentError, match="pair"):
            k.process((y,))


def test_closed():
    k = keyer.Keyer(threads=1)
    k.close()
    assert k.closed
    with pytest.raises(keyer.InvalidArgumentError, match="closed"):
        k.process(np.zeros((8, 8, 3), np.uint8))
    k.close()  # twice is fine


def test_read_image_errors(tmp_path):
    with pytest.raises(keyer.InputOutputError, match="missing.jpg"):
        keyer.read_image(tmp_path / "missing.jpg")
    with pytest.raises(keyer.InvalidArgumentError, match="format 'cmyk'"):
        keyer.read_image(tmp_path / "x.jpg", "cmyk")
