#!/usr/bin/python3
"""U^2-NetP input tensors for the test photos and ONNX Runtime's outputs on them.

The input is made as U^2-Net's own inference code makes it (github.com/xuebinqin/U-2-Net,
u2net_test.py: SalObjDataset with transforms RescaleT(320) then ToTensorLab(flag=0), from
data_loader.py), restated here with numpy:
  1. the JPEG decoded to 8-bit RGB. U^2-Net reads it with skimage.io.imread; here FFmpeg
     decodes it (`ffmpeg -i PHOTO -f rawvideo -pix_fmt rgb24`, FFmpeg's JPEG decoder and its
     YUV-to-RGB conversion: code values may differ by one or two from libjpeg's);
  2. RescaleT(320): skimage.transform.resize(image, (320, 320), mode='constant') with its
     defaults of scikit-image 0.14 (U^2-Net's requirements): bilinear (order 1) with half-pixel
     centres, src = (dst + 0.5) * in / 320 - 0.5, no anti-aliasing filter, on the image
     converted to float64 in [0, 1] (value / 255). Both photos are larger than 320 in every
     dimension that is resampled down, and every sample falls inside the image, so the
     constant border mode does not matter;
  3. ToTensorLab(flag=0): image / max(image) (the maximum over all channels and pixels), then
     per channel (R - 0.485) / 0.229, (G - 0.456) / 0.224, (B - 0.406) / 0.225, in float64;
  4. transposed to CHW and cast to float32 (u2net_test.py's inputs_test.type(torch.FloatTensor)),
     with a batch dimension: 1x3x320x320, NCHW, RGB;
  5. rounded to float16 (round to nearest even) and stored as input.f16 (little-endian IEEE
     binary16, 600 KB instead of 1.2 MB for float32): ONNX Runtime runs on these values, exact
     in float32, so the committed outputs belong to exactly the stored input. The rounding
     moves values by at most 2^-11 relative (about 1e-3 at this tensor's largest magnitudes),
     far below what separates U^2-Net's preprocessing from keyer's.
Outputs: '1959' (the final mask d0, a sigmoid probability, 1x1x320x320) in full; the six side
outputs '1960'..'1965' (d1..d6, each upsampled to 320x320 before its sigmoid) subsampled on a grid
(every 8th row and column starting at 3: rows and columns 3, 11, ..., 315; 40x40 values) to keep the
committed files small.

Usage: /usr/bin/python3 tests/onnx/u2netp_refs.py [--model models/u2netp.onnx] [--ort DIR]
Writes tests/data/onnx/u2netp/<photo>/{input.f16, 1959.f32, 1960_sub8.f32, ...}.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZE = 320
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SUB_START, SUB_STEP = 3, 8


def decode_rgb(path):
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                            "stream=width,height", "-of", "csv=p=0", path],
                           check=True, capture_output=True, text=True).stdout.strip()
    w, h = (int(v) for v in probe.split(",")[:2])
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt",
                          "rgb24", "-"], check=True, capture_output=True).stdout
    if len(raw) != w * h * 3:
        raise SystemExit(f"{path}: decoded {len(raw)} bytes, expected {w * h * 3}")
    return np.frombuffer(raw, np.uint8).reshape(h, w, 3)


def resize_bilinear(img, oh, ow):
    """Half-pixel-centre bilinear resampling without anti-aliasing (float64, HWC)."""
    ih, iw = img.shape[:2]

    def taps(n_out, n_in):
        src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        src = np.clip(src, 0, n_in - 1)
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, src - i0

    y0, y1, fy = taps(oh, ih)
    x0, x1, fx = taps(ow, iw)
    fy = fy[:, None, None]
    fx = fx[None, :, None]
    top = img[y0][:, x0] * (1 - fx) + img[y0][:, x1] * fx
    bot = img[y1][:, x0] * (1 - fx) + img[y1][:, x1] * fx
    return top * (1 - fy) + bot * fy


def u2net_input(path):
    img = decode_rgb(path).astype(np.float64) / 255.0
    img = resize_bilinear(img, SIZE, SIZE)
    img = img / np.max(img)
    out = np.empty_like(img)
    for c in range(3):
        out[:, :, c] = (img[:, :, c] - MEAN[c]) / STD[c]
    return out.transpose(2, 0, 1)[None].astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(REPO, "models", "u2netp.onnx"))
    ap.add_argument("--ort", help="ONNX Runtime directory (scripts/fetch-onnxruntime.sh)")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "onnx", "u2netp"))
    args = ap.parse_args()
    ort = args.ort or subprocess.run([os.path.join(REPO, "scripts", "fetch-onnxruntime.sh")],
                                     check=True, capture_output=True,
                                     text=True).stdout.strip().splitlines()[-1]
    env = dict(os.environ, NODE_PATH=os.path.join(ort, "node_modules"))
    for photo in ("grace_hopper", "messi5"):
        d = os.path.join(args.out, photo)
        os.makedirs(d, exist_ok=True)
        x = u2net_input(os.path.join(REPO, "tests", "data", photo + ".jpg"))
        x16 = x.astype("<f2")
        x16.tofile(os.path.join(d, "input.f16"))
        with tempfile.TemporaryDirectory() as tmp:
            x32 = os.path.join(tmp, "input.f32")
            x16.astype("<f4").tofile(x32)  # exact: every binary16 value is a float32 value
            r = subprocess.run(["node", os.path.join(REPO, "tests", "onnx", "ort_run.js"),
                                args.model, tmp, f"input.1={x32}:1x3x{SIZE}x{SIZE}"],
                               env=env, check=True, capture_output=True, text=True)
            for line in r.stdout.splitlines():
                o = json.loads(line)
                y = np.fromfile(os.path.join(tmp, o["file"]), "<f4").reshape(o["dims"])
                if o["name"] == "1959":
                    y.astype("<f4").tofile(os.path.join(d, "1959.f32"))
                else:
                    sub = y[:, :, SUB_START::SUB_STEP, SUB_START::SUB_STEP]
                    sub.astype("<f4").tofile(os.path.join(d, f"{o['name']}_sub8.f32"))
                print(f"{photo}: {o['name']} {o['dims']} min {y.min():.6f} max {y.max():.6f} "
                      f"mean {y.mean():.6f} (>0.5: {(y > 0.5).mean() * 100:.2f}%)")


if __name__ == "__main__":
    main()
