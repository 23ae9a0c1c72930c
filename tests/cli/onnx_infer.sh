#!/usr/bin/env bash
# keyer infer and keyer models on ONNX files: --input-tensor in the model's NCHW layout,
# --input-size for dynamic height and width, outputs written in the declared NCHW shape and
# checked against a NumPy computation of the same convolution (tests/data/onnx_import/
# dynamic.onnx, see make_models.py there); u2netp's seven outputs when the model is present;
# the messages for a missing size and an unsupported operator. Needs /usr/bin/python3 with
# NumPy (a dependency of python3-onnx); skipped (77) without it.
set -u
bin=${KEYER_BIN:?KEYER_BIN is not set}
fail() { echo "FAIL: $*"; exit 1; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=${KEYER_TEST_DATA:-$repo/tests/data}
models=${KEYER_MODELS_DIR:-$repo/models}
py=/usr/bin/python3
if ! "$py" -c "import numpy" 2>/dev/null; then
    echo "SKIP: /usr/bin/python3 has no NumPy"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$data/onnx_import/dynamic.onnx"

for size in 5x7 12x9; do
    h=${size%x*}
    w=${size#*x}
    "$py" - "$tmp/x.f32" "$h" "$w" <<'PY' || fail "cannot write the input"
import sys, numpy as np
h, w = int(sys.argv[2]), int(sys.argv[3])
x = ((np.arange(2 * h * w) * 37) % 11 / 5.0 - 1.0).astype(np.float32).reshape(1, 2, h, w)
x.tofile(sys.argv[1])
PY
    out=$("$bin" infer --model "$model" --input-size "$size" --backend reference \
        --input-tensor "$tmp/x.f32" --output-dir "$tmp/out$size" 2>&1) || fail "infer $size: $out"
    grep -q '"shape": \[1, 3, '"$h, $w"'\]' "$tmp/out$size/outputs.json" ||
        fail "outputs.json does not give the NCHW shape [1, 3, $h, $w]"
    "$py" - "$tmp/x.f32" "$tmp/out$size/y.f32" "$h" "$w" <<'PY' || fail "output $size differs"
import sys, numpy as np
h, w = int(sys.argv[3]), int(sys.argv[4])
x = np.fromfile(sys.argv[1], np.float32).reshape(2, h, w).astype(np.float64)
y = np.fromfile(sys.argv[2], np.float32).reshape(3, h, w)
xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
want = np.zeros((3, h, w))
for o in range(3):
    want[o] = o / 10.0
    for i in range(2):
        for ky in range(3):
            for kx in range(3):
                want[o] += (o + 1) * (i + 1) * (ky * 3 + kx + 1) / 100.0 * xp[i, ky:ky + h, kx:kx + w]
want = np.maximum(want, 0)
err = np.abs(y - want) / np.maximum(1.0, np.abs(want))
print("max relative error %.3g" % err.max())
sys.exit(0 if err.max() <= 1e-5 else 1)
PY
done

# keyer models describes the file, with the graph's and the file's shapes.
out=$("$bin" models "$model" --input-size 5x7) || fail "models: $out"
echo "$out" | grep -q "input  0 x .*\[1,5,7,2\]  file \[1,2,5,7\]" || fail "models: input line: $out"
echo "$out" | grep -q "operators: CONV_2D 1, RELU 1" || fail "models: operators: $out"

# A dynamic size left open, and an unsupported operator, are named.
out=$("$bin" infer --model "$model" --input-tensor "$tmp/x.f32" --output-dir "$tmp/o" 2>&1) &&
    fail "accepted a dynamic size without --input-size"
echo "$out" | grep -q "dimension 2 (height) is dynamic" || fail "message: $out"
out=$("$bin" models "$data/onnx_import/unsupported.onnx" 2>&1) && fail "accepted TopK"
echo "$out" | grep -q "node 'topk_0' (op TopK, opset 13) is not supported" || fail "message: $out"
"$bin" infer --model "$model" --input-size 5 --input-tensor "$tmp/x.f32" --output-dir "$tmp/o" \
    > /dev/null 2>&1 && fail "accepted --input-size 5"

# u2netp (when fetched): seven 320x320 masks in [0, 1], named by their ONNX output names.
if [ -f "$models/u2netp.onnx" ]; then
    "$py" -c "import numpy as np; np.full((1,3,320,320), 0.25, np.float32).tofile('$tmp/u.f32')"
    out=$("$bin" infer --model "$models/u2netp.onnx" --input-tensor "$tmp/u.f32" --threads 2 \
        --output-dir "$tmp/u2" 2>&1) || fail "u2netp: $out"
    for name in 1959 1960 1961 1962 1963 1964 1965; do
        [ "$(stat -c %s "$tmp/u2/$name.f32")" = 409600 ] || fail "u2netp output $name"
    done
    "$py" -c "
import numpy as np, sys
y = np.fromfile('$tmp/u2/1959.f32', np.float32)
sys.exit(0 if y.min() >= 0 and y.max() <= 1 and y.max() > y.min() else 1)" ||
        fail "u2netp mask out of range"
fi
echo "PASS"
