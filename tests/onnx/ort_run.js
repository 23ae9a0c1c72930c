#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (onnxruntime-node, installed by
// scripts/fetch-onnxruntime.sh) on raw float32 inputs and writes every output as raw float32:
// the oracle behind tests/data/onnx/. Never used by keyer itself.
//
// Usage: NODE_PATH=<dir>/node_modules node tests/onnx/ort_run.js MODEL.onnx OUTDIR \
//            NAME=FILE.f32:D0xD1x... [NAME=FILE.f32:DIMS ...]
//   Every model input is given by name with its raw little-endian float32 file and its shape.
//   Writes OUTDIR/<output name>.f32 for every model output (characters other than letters,
//   digits, '.', '_' and '-' in the name become '_'), raw little-endian float32 in the output's
//   own shape and layout (int64/int32/float16/double outputs are converted to float32), and
//   prints one JSON line per output: {"name", "file", "type", "dims"}.
//
// Session: the CPU execution provider only, graph optimisation level "disabled" (ONNX
// Runtime's plain per-operator CPU kernels, no fusion or constant folding), one intra-op and
// one inter-op thread (the same bits on every run).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function die(msg) {
    process.stderr.write(`ort_run: ${msg}\n`);
    process.exit(1);
}

function halfToFloat(h) {
    const s = (h & 0x8000) ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    if (e === 0) return s * m * Math.pow(2, -24);
    if (e === 31) return m ? NaN : s * Infinity;
    return s * (1 + m / 1024) * Math.pow(2, e - 15);
}

function toFloat32(t) {
    const d = t.data;
    if (t.type === 'float32') return d;
    const out = new Float32Array(d.length);
    for (let i = 0; i < d.length; i++) {
        if (t.type === 'float16') out[i] = halfToFloat(d[i]);
        else out[i] = Number(d[i]);
    }
    return out;
}

async function main() {
    const args = process.argv.slice(2);
    if (args.length < 2) die('usage: ort_run.js MODEL.onnx OUTDIR NAME=FILE.f32:D0xD1x... ...');
    const [model, outdir] = args;
    const feeds = {};
    for (const spec of args.slice(2)) {
        const m = /^([^=]+)=(.+):([0-9]+(?:x[0-9]+)*)$/.exec(spec);
        if (!m) die(`bad input spec '${spec}' (want NAME=FILE.f32:D0xD1x...)`);
        const dims = m[3].split('x').map(Number);
        const count = dims.reduce((a, b) => a * b, 1);
        const buf = fs.readFileSync(m[2]);
        if (buf.length !== count * 4) {
            die(`${m[2]}: ${buf.length} bytes, the shape ${m[3]} needs ${count * 4}`);
        }
        const data = new Float32Array(count);
        for (let i = 0; i < count; i++) data[i] = buf.readFloatLE(i * 4);
        feeds[m[1]] = new ort.Tensor('float32', data, dims);
    }
    const session = await ort.InferenceSession.create(model, {
        executionProviders: ['cpu'],
        graphOptimizationLevel: 'disabled',
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        executionMode: 'sequential',
    });
    for (const name of session.inputNames) {
        if (!(name in feeds)) die(`${model}: input '${name}' not given`);
    }
    const results = await session.run(feeds);
    fs.mkdirSync(outdir, { recursive: true });
    for (const name of session.outputNames) {
        const t = results[name];
        const f = toFloat32(t);
        const b = Buffer.alloc(f.length * 4);
        for (let i = 0; i < f.length; i++) b.writeFloatLE(f[i], i * 4);
        const file = name.replace(/[^A-Za-z0-9._-]/g, '_') + '.f32';
        fs.writeFileSync(path.join(outdir, file), b);
        console.log(JSON.stringify({ name, file, type: t.type, dims: t.dims }));
    }
}

main().catch((e) => die(e && e.message ? e.message : String(e)));
