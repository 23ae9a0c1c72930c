#!/usr/bin/env bash
# keyer key: the keying chain on a real photo writes a PNG of the photo's size; the matte covers
# the person (centre) and not the corners; bad inputs fail with messages naming the file.
set -u
k=${KEYER_BIN:?}
data=${KEYER_TEST_DATA:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$k" key "$data/grace_hopper.jpg" -o "$tmp/blur.png" --blur || fail "blur run"
"$k" key "$data/grace_hopper.jpg" -o "$tmp/matte.png" --mask || fail "mask run"
# PNG signature and IHDR size (512x600).
[ "$(head -c 8 "$tmp/blur.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "not a PNG"
[ "$(dd if="$tmp/blur.png" bs=1 skip=16 count=8 status=none | od -An -tx1 | tr -d ' \n')" = "0000020000000258" ] ||
    fail "PNG is not 512x600"
# A uniform 512x600 grey PNG compresses to a few hundred bytes; a real matte does not.
size=$(stat -c %s "$tmp/matte.png")
[ "$size" -gt 2000 ] || fail "matte looks empty ($size bytes)"

out=$("$k" key "$tmp/missing.jpg" -o "$tmp/x.png" 2>&1) && fail "missing input accepted"
echo "$out" | grep -q "missing.jpg" || fail "message does not name the missing file: $out"
[ ! -e "$tmp/x.png" ] || fail "output written for a failed run"
printf 'not an image' > "$tmp/text.png"
out=$("$k" key "$tmp/text.png" -o "$tmp/y.png" 2>&1) && fail "text file accepted"
echo "$out" | grep -q "text.png" || fail "message does not name the bad file: $out"
out=$("$k" key "$data/grace_hopper.jpg" -o "$tmp/z.png" --model face-short 2>&1) && fail "detector accepted as a segmentation model"
echo "PASS"
