"""keyer.Keyer: per-frame results equal the C library's (the `keyer key` command, which keys
a photo through the same public API), in every input layout, with out= and matte= reuse."""
import subprocess

import numpy as np
import pytest

import keyer


def key_cli(keyer_bin, photo, out, *args):
    subprocess.run([keyer_bin, "key", str(photo), "-o", str(out), "--backend", "cpu", *args],
                   check=True, capture_output=True)
    return out


@pytest.mark.parametrize("cli_args,effect,opts,fmt", [
    ((), None, {}, "rgb"),
    (("--replace", "3060c0"), "color", {"color": "#3060c0"}, "rgb"),
    (("--mask",), "mask", {}, "gray"),
    (("--alpha",), "alpha", {}, "rgba"),
    (("--green",), "green", {}, "rgb"),
])
def test_process_equals_keyer_key(keyer_bin, data, tmp_path, cli_args, effect, opts, fmt):
    photo = data / "grace_hopper.jpg"
    ref = keyer.read_image(key_cli(keyer_bin, photo, tmp_path / "ref.png", *cli_args), fmt)
    frame = keyer.read_image(photo)
    # a photo: `keyer key` keys without temporal history
    with keyer.Keyer(effect=effect, temporal="off", **opts) as k:
        got = k.process(frame)
    assert got.dtype == np.uint8 and got.shape == ref.shape
    assert np.array_equal(got, ref)


def test_bgr_and_rgba_layouts_equal_rgb(data):
    rgb = keyer.read_image(data / "messi5.jpg")
    with keyer.Keyer(temporal="off") as k:
        ref, ref_matte = k.process(rgb, matte=True)
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        out = k.process(bgr, format="bgr")
        assert np.array_equal(out[..., ::-1], ref)
        assert np.array_equal(k.matte(bgr, format="bgr"), ref_matte)
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 255, np.uint8)])
    with keyer.Keyer(temporal="off", format="rgba") as k:
        out, matte = k.process(rgba, matte=True)
        assert out.shape == rgba.shape
        assert np.array_equal(out[..., :3], ref)
        assert np.array_equal(matte, ref_matte)


def test_out_and_matte_reuse(data):
    frame = keyer.read_image(data / "grace_hopper.jpg")
    h, w = frame.shape[:2]
    out = np.zeros_like(frame)
    matte = np.zeros((h, w), np.uint8)
    with keyer.Keyer(temporal="off") as k:
        ref, ref_matte = k.process(frame, matte=True)
        r = k.process(frame, out, matte=matte)
        assert r[0] is out and r[1] is matte
        assert np.array_equal(out, ref) and np.array_equal(matte, ref_matte)
        # rows with padding (a view into a wider array) are taken as they are
        wide = np.zeros((h, w + 16, 3), np.uint8)
        k.process(frame, wide[:, :w])
        assert np.array_equal(wide[:, :w], ref) and not wide[:, w:].any()


def test_nv12_planes_and_stacked(data):
    # an NV12 picture made from the photo's luma, with neutral chroma
    rgb = keyer.read_image(data / "messi5.jpg")[:340, :548]
    y = (0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]).astype(np.uint8)
    h, w = y.shape
    uv = np.full((h // 2, w // 2, 2), 128, np.uint8)
    stacked = np.concatenate([y, uv.reshape(h // 2, w)], axis=0)
    with keyer.Keyer(format="nv12", temporal="off") as k:
        (oy, ouv), matte = k.process((y, uv), matte=True)
        assert oy.shape == (h, w) and ouv.shape == (h // 2, w // 2, 2)
        assert 0 < matte.mean() < 255
        out = k.process(stacked)
        assert out.shape == stacked.shape
        assert np.array_equal(out[:h], oy) and np.array_equal(out[h:], ouv.reshape(h // 2, w))
        # out= reuse of the planes
        py, puv = np.empty_like(oy), np.empty_like(ouv)
        r = k.process((y, uv), (py, puv))
        assert r[0] is py and np.array_equal(py, oy) and np.array_equal(puv, ouv)


def test_temporal_smoothing_and_reset(data):
    frame = keyer.read_image(data / "messi5.jpg")
    shifted = np.roll(frame, 24, axis=1)
    with keyer.Keyer() as k, keyer.Keyer(temporal="off") as fresh:
        first = k.matte(frame)
        assert np.array_equal(first, fresh.matte(frame))  # no history on the first frame
        second = k.matte(shifted)
        assert not np.array_equal(second, fresh.matte(shifted))  # smoothed with the first
        k.reset()
        assert np.array_equal(k.matte(shifted), fresh.matte(shifted))


def test_background_image_and_set_background(data, tmp_path):
    frame = keyer.read_image(data / "grace_hopper.jpg")
    bg = keyer.read_image(data / "messi5.jpg")
    with keyer.Keyer(background=str(data / "messi5.jpg"), temporal="off") as a, \
            keyer.Keyer(background=bg, temporal="off") as b:
        ra = a.process(frame)
        assert np.array_equal(ra, b.process(frame))
        b.set_background(np.ascontiguousarray(bg[..., ::-1]), format="bgr")
        assert np.array_equal(ra, b.process(frame))
    path = tmp_path / "x.png"
    keyer.write_image(path, ra)
    assert np.array_equal(keyer.read_image(path), ra)


def test_options_reach_the_tables(data):
    frame = keyer.read_image(data / "grace_hopper.jpg")
    with keyer.Keyer(temporal="off") as a, keyer.Keyer(temporal="off", feather=6, dilate=-3,
                                                        blur_radius=30, dither=False) as b:
        assert not np.array_equal(a.matte(frame), b.matte(frame))
        assert not np.array_equal(a.process(frame), b.process(frame))
    names = {o["name"] for o in keyer.options("refine")}
    assert {"feather", "dilate", "temporal", "guided_radius"} <= names
    assert {o["name"] for o in keyer.options("composite")} >= {"mode", "blur_radius", "color"}


def test_reference_backend_is_close_to_cpu(data):
    frame = keyer.read_image(data / "grace_hopper.jpg")[::4, ::4].copy()
    with keyer.Keyer(temporal="off") as a, keyer.Keyer(device="reference", temporal="off") as b:
        d = np.abs(a.matte(frame).astype(int) - b.matte(frame).astype(int))
        assert (d > 8).mean() < 0.01


def test_models():
    ms = keyer.models()
    names = [m["name"] for m in ms]
    assert "selfie" in names and "face-short" in names
    selfie = ms[names.index("selfie")]
    assert selfie["task"] == "segmentation" and selfie["has_mask"] and selfie["present"]
    assert selfie["input_size"] == (256, 256)
    assert isinstance(keyer.version(), str)


def test_pose_model_mask(data):
    # a model whose mask is one output among several, as logits
    frame = keyer.read_image(data / "messi5.jpg")
    with keyer.Keyer(model="pose-lite", temporal="off") as k:
        assert k.model == "pose-lite"
        m = k.matte(frame)
        assert m.shape == frame.shape[:2] and 0 < m.mean() < 255
