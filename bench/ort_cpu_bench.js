// Times ONNX Runtime's CPU execution provider on one ONNX model: the reference point of
// bench/onnx_cpu_vs_ort.sh. Needs node and the onnxruntime-node package (found through
// NODE_PATH; the script sets it). Prints one JSON line.
//
//   node bench/ort_cpu_bench.js MODEL.onnx [--threads N] [--iterations N] [--warmup N]
//
// median_ms: the median wall time of one inference; cpu_ms: the process's CPU time (user +
// system, every thread) per inference, averaged over the timed runs.
//
// Session: CPU provider, intraOpNumThreads N (default 2), interOpNumThreads 1, sequential
// execution, graph optimisation level "all". Every graph input gets a fixed pseudo-random float32
// tensor of its declared shape (dynamic dimensions: 1 for the batch, 320 otherwise).
'use strict';
const ort = require('onnxruntime-node');

function usage(msg) {
  if (msg) console.error('ort_cpu_bench: ' + msg);
  console.error('usage: node ort_cpu_bench.js MODEL.onnx [--threads N] [--iterations N] [--warmup N]');
  process.exit(2);
}

function parse(argv) {
  const o = {model: null, threads: 2, iterations: 30, warmup: 5};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 0) usage(a + ' takes a non-negative integer');
      return v;
    };
    if (a === '--threads') o.threads = num();
    else if (a === '--iterations') o.iterations = num();
    else if (a === '--warmup') o.warmup = num();
    else if (a.startsWith('--')) usage('unknown option ' + a);
    else if (o.model === null) o.model = a;
    else usage('one model only');
  }
  if (o.model === null) usage('no model');
  if (o.iterations < 1) usage('--iterations must be at least 1');
  return o;
}

async function main() {
  const o = parse(process.argv.slice(2));
  const session = await ort.InferenceSession.create(o.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: o.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = (session.inputMetadata || []).find((m) => m.name === name);
    let shape = [1, 3, 320, 320];
    if (meta && meta.isTensor && Array.isArray(meta.shape))
      shape = meta.shape.map((d, i) => (typeof d === 'number' && d > 0 ? d : i === 0 ? 1 : 320));
    const n = shape.reduce((a, b) => a * b, 1);
    const x = new Float32Array(n);
    let h = 12345;
    for (let i = 0; i < n; i++) {
      h = (Math.imul(h, 1664525) + 1013904223) >>> 0;
      x[i] = (h >>> 8) / 16777216 * 2 - 1;
    }
    feeds[name] = new ort.Tensor('float32', x, shape);
  }
  for (let i = 0; i < o.warmup; i++) await session.run(feeds);
  const c0 = process.cpuUsage();
  const t = [];
  for (let i = 0; i < o.iterations; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const c = process.cpuUsage(c0);
  const cpuMs = (c.user + c.system) / 1000 / o.iterations;
  t.sort((a, b) => a - b);
  const med = t.length % 2 ? t[t.length >> 1] : (t[t.length / 2 - 1] + t[t.length / 2]) / 2;
  console.log(JSON.stringify({
    runtime: 'onnxruntime-node ' + (ort.env && ort.env.versions ? ort.env.versions.common : '?'),
    model: o.model, threads: o.threads, iterations: o.iterations, warmup: o.warmup,
    median_ms: Number(med.toFixed(3)), min_ms: Number(t[0].toFixed(3)),
    cpu_ms: Number(cpuMs.toFixed(3)),
  }));
}

main().catch((e) => {
  console.error('ort_cpu_bench: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
