// The ONNX Runtime peer: times one exported workload on 2 intra-op threads
// with every graph optimization on, and prints its median in ms.
// Usage: node ort_peer.js MODEL.onnx REPS   (NODE_PATH reaches onnxruntime-node)
const ort = require('onnxruntime-node');

function random(dims) {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = Math.random() - 0.5;
  return new ort.Tensor('float32', data, dims);
}

function causalMask(s) {
  const data = new Float32Array(s * s);
  for (let i = 0; i < s; i++)
    for (let j = 0; j < s; j++) data[i * s + j] = j > i ? -Infinity : 0;
  return new ort.Tensor('float32', data, [s, s]);
}

(async () => {
  const [model, reps] = [process.argv[2], Number(process.argv[3])];
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 2, interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const feeds = {};
  for (const name of session.inputNames) {
    // The workloads' shapes: encoder layers take x, the Transformer src,
    // tgt and its causal mask.
    if (name === 'mask') feeds[name] = causalMask(64);
    else if (model.includes('w4')) feeds[name] = random([8, 64, 512]);
    else if (model.includes('w1')) feeds[name] = random([1, 128, 768]);
    else if (model.includes('w2')) feeds[name] = random([8, 128, 768]);
    else if (model.includes('w9')) feeds[name] = random([1, 128, 1024]);
    else if (model.includes('w8-1k')) feeds[name] = random([1, 1024, 768]);
    else if (model.includes('w8-4k')) feeds[name] = random([1, 4096, 768]);
    else feeds[name] = random([1, 32, 256]);
  }
  for (let i = 0; i < 3; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < reps; i++) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(times[Math.floor(times.length / 2)].toFixed(4));
})();
