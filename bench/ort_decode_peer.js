// The ONNX Runtime peer of W7: the decoder exported with past_key_values
// (w7-past.onnx), 2 intra-op threads, every graph optimization on, greedy:
// the prompt with an empty past, then one token a step with the presents
// fed back. Prints the prompt's time, the median time per new token and the
// tokens. Usage: node ort_decode_peer.js MODEL.onnx PROMPT_IDS NEW
// [LAYERS KV_HEADS HEAD_DIM] (W7's 12 12 64 by default; W10's K/V heads
// are 4).
const ort = require('onnxruntime-node');

function argmaxLast(logits) {
  const [, s, v] = logits.dims;
  const data = logits.data, base = (s - 1) * v;
  let best = 0;
  for (let i = 1; i < v; i++) if (data[base + i] > data[base + best]) best = i;
  return best;
}

(async () => {
  const [model, promptArg, newArg, ...shape] = process.argv.slice(2);
  const prompt = promptArg.split(',').map(Number), steps = Number(newArg);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 2, interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const [layers, heads, dh] = shape.length ? shape.map(Number) : [12, 12, 64];
  const ids = (t) => new ort.Tensor('int64', BigInt64Array.from(t.map(BigInt)), [1, t.length]);
  const empty = () => new ort.Tensor('float32', new Float32Array(0), [layers, 1, heads, 0, dh]);
  const run = (t, k, v) => session.run({input_ids: ids(t), past_k: k, past_v: v});
  for (let i = 0; i < 2; i++) await run(prompt, empty(), empty()); // warm-up
  let t0 = process.hrtime.bigint();
  let out = await run(prompt, empty(), empty());
  const promptMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const tokens = [argmaxLast(out.logits)], times = [];
  for (let i = 1; i < steps; i++) {
    t0 = process.hrtime.bigint();
    out = await run([tokens[tokens.length - 1]], out.present_k, out.present_v);
    tokens.push(argmaxLast(out.logits));
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`${promptMs.toFixed(3)} ${times[Math.floor(times.length / 2)].toFixed(4)} ${tokens.join(',')}`);
})();
