#!/usr/bin/env bash
# --model FILE with --model-config FILE.yaml and --model-options: a user's model described by
# the user keys like the registry's entry for it. The selfie TFLite file given as a path with
# a description equal to the registry's keys exactly as --model selfie does; a description
# that reads the mask differently (logits) changes the matte, and --model-options (applied
# after the file) puts it back. Bad descriptions fail with messages naming what is wrong.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
models=${KEYER_MODELS_DIR:?KEYER_MODELS_DIR is not set}
selfie="$models/selfie_segmentation.tflite"
[ -f "$selfie" ] || { echo "SKIP: $selfie is absent (scripts/setup.sh fetches it)"; exit 77; }

"$bin" make-sample "$tmp/in.mp4" --image "$data/grace_hopper.jpg" --size 320x240 --frames 8 \
    --preset ultrafast 2>/dev/null || fail "make-sample failed"
run() { "$bin" "$tmp/in.mp4" --mask --smooth 0 --device cpu --preset ultrafast -q "$@"; }

run -o "$tmp/registry.mp4" --model selfie 2>"$tmp/err" || { cat "$tmp/err"; fail "--model selfie failed"; }
cat > "$tmp/selfie.yaml" <<YAML
# the registry's description of selfie, written by a user
input: input_1
size: [256, 256]
layout: nhwc
color_order: rgb
range: unit
fit: stretch
output_index: 0
output_kind: probability
YAML
run -o "$tmp/described.mp4" --model "$selfie" --model-config "$tmp/selfie.yaml" 2>"$tmp/err" ||
    { cat "$tmp/err"; fail "the described run failed"; }
"$bin" compare "$tmp/registry.mp4" "$tmp/described.mp4" --min-psnr 60 >"$tmp/cmp" ||
    { cat "$tmp/cmp"; fail "the described file keys differently from the registry's model"; }

# read as logits, the probabilities go through a sigmoid: another matte
sed 's/^output_kind: probability/output_kind: logits/' "$tmp/selfie.yaml" > "$tmp/logits.yaml"
run -o "$tmp/logits.mp4" --model "$selfie" --model-config "$tmp/logits.yaml" 2>"$tmp/err" ||
    { cat "$tmp/err"; fail "the logits run failed"; }
"$bin" compare "$tmp/registry.mp4" "$tmp/logits.mp4" --min-psnr 40 >/dev/null 2>&1 &&
    fail "output_kind logits did not change the matte"
# --model-options come after the file
run -o "$tmp/back.mp4" --model "$selfie" --model-config "$tmp/logits.yaml" \
    --model-options output_kind=probability 2>"$tmp/err" || { cat "$tmp/err"; fail "the options run failed"; }
"$bin" compare "$tmp/registry.mp4" "$tmp/back.mp4" --min-psnr 60 >"$tmp/cmp" ||
    { cat "$tmp/cmp"; fail "--model-options did not override the file"; }
# the main configuration file may name the description
printf 'model: %s\nmodel_config: %s\nmask: true\n' "$selfie" "$tmp/selfie.yaml" > "$tmp/keyer.yaml"
"$bin" --config "$tmp/keyer.yaml" "$tmp/in.mp4" -o "$tmp/cfg.mp4" --smooth 0 --device cpu \
    --preset ultrafast -q 2>"$tmp/err" || { cat "$tmp/err"; fail "model_config in --config failed"; }
"$bin" compare "$tmp/registry.mp4" "$tmp/cfg.mp4" --min-psnr 60 >"$tmp/cmp" ||
    { cat "$tmp/cmp"; fail "model_config in --config keys differently"; }

# bad descriptions: a clear message, no output
expect_error() { # NAME PATTERN ARGS...
    local name=$1 pattern=$2
    shift 2
    if run -o "$tmp/$name.mp4" "$@" 2>"$tmp/$name.err"; then fail "$name: the run succeeded"; fi
    grep -q -- "$pattern" "$tmp/$name.err" || { cat "$tmp/$name.err"; fail "$name: no '$pattern' in the message"; }
    [ ! -s "$tmp/$name.mp4" ] || fail "$name: an output was written"
}
printf 'layout: nhwc\noutput: mask\n' > "$tmp/badout.yaml"
expect_error badout "no output named 'mask' (its outputs: '" --model "$selfie" --model-config "$tmp/badout.yaml"
printf 'layout: nhwc\ninput: image\n' > "$tmp/badin.yaml"
expect_error badin "no input named 'image'" --model "$selfie" --model-config "$tmp/badin.yaml"
printf 'layout: nchw\n' > "$tmp/nchw.yaml"
expect_error layout "says layout nchw" --model "$selfie" --model-config "$tmp/nchw.yaml"
printf 'layout: nhwc\nlayout_of_input: x\n' > "$tmp/key.yaml"
expect_error key "key.yaml:2: unknown key 'layout_of_input'" --model "$selfie" --model-config "$tmp/key.yaml"
printf 'output_kind: heatmap\n' > "$tmp/kind.yaml"
expect_error kind "output_kind" --model "$selfie" --model-config "$tmp/kind.yaml"
expect_error missing "$tmp/none.yaml" --model "$selfie" --model-config "$tmp/none.yaml"
expect_error nomodel "no --model given" --model-config "$tmp/selfie.yaml"
expect_error modelfile "$tmp/none.onnx: model file not found" --model "$tmp/none.onnx" --model-config "$tmp/selfie.yaml"
expect_error options "--model-options" --model "$selfie" --model-options person_class=-1
printf 'layout: nhwc\noutput_kind: classes\n' > "$tmp/classes.yaml"
expect_error classes "one channel" --model "$selfie" --model-config "$tmp/classes.yaml"
echo "PASS"
