#!/usr/bin/env bash
# --config FILE.yaml: keys mirror the long options (and the option tables' fields); the command
# line overrides the file. A configured run equals the same run given on the command line.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
if ! "$bin" --help >/dev/null 2>&1; then fail "keyer --help failed"; fi

"$bin" make-sample "$tmp/in.mp4" --image "$data/grace_hopper.jpg" --size 320x180 --frames 12 \
    --preset ultrafast 2>/dev/null || fail "make-sample failed"
cat > "$tmp/keyer.yaml" <<YAML
# keyer settings
model: selfie
mask: true
smooth: 0
refine:
  feather: 3
device: cpu
preset: ultrafast
inputs: [$tmp/in.mp4]
output: $tmp/from-config.mp4
YAML
"$bin" --config "$tmp/keyer.yaml" -q 2>"$tmp/err" || { cat "$tmp/err"; fail "the configured run failed"; }
"$bin" "$tmp/in.mp4" -o "$tmp/from-cli.mp4" --model selfie --mask --smooth 0 --feather 3 \
    --device cpu --preset ultrafast -q 2>/dev/null || fail "the command-line run failed"
"$bin" compare "$tmp/from-config.mp4" "$tmp/from-cli.mp4" --min-psnr 60 >"$tmp/cmp" ||
    { cat "$tmp/cmp"; fail "the configured run differs from the same options on the command line"; }
# the command line wins: --feather 0 instead of the file's 3 changes the matte
"$bin" --config "$tmp/keyer.yaml" -o "$tmp/override.mp4" --feather 0 -q 2>/dev/null ||
    fail "the overriding run failed"
"$bin" compare "$tmp/override.mp4" "$tmp/from-cli.mp4" --min-psnr 60 >"$tmp/cmp2" &&
    fail "--feather 0 on the command line did not override the file"
"$bin" "$tmp/in.mp4" -o "$tmp/f0.mp4" --model selfie --mask --smooth 0 --feather 0 \
    --device cpu --preset ultrafast -q 2>/dev/null || fail "the feather 0 run failed"
"$bin" compare "$tmp/override.mp4" "$tmp/f0.mp4" --min-psnr 60 >"$tmp/cmp3" ||
    { cat "$tmp/cmp3"; fail "the override is not the command line's value"; }
echo "PASS"
