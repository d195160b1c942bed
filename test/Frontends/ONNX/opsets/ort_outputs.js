// Runs one model with ONNX Runtime and prints its outputs as JSON, for the
// fixtures of opsets the ONNX library here does not know.
// Usage: node ort_outputs.js MODEL.onnx INPUTS.json   (NODE_PATH reaches onnxruntime-node)
// INPUTS.json: {name: {"type": "float32"|"int64"|..., "dims": [...], "data": [...]}}
const ort = require('onnxruntime-node');
const fs = require('fs');

const arrays = {float32: Float32Array, float64: Float64Array, int32: Int32Array,
                int64: BigInt64Array, bool: Uint8Array};

(async () => {
  const [model, inputsFile] = process.argv.slice(2);
  const inputs = JSON.parse(fs.readFileSync(inputsFile, 'utf8'));
  const feeds = {};
  for (const [name, t] of Object.entries(inputs)) {
    const data = t.type === 'int64' ? t.data.map(BigInt) : t.data;
    feeds[name] = new ort.Tensor(t.type, arrays[t.type].from(data), t.dims);
  }
  const session = await ort.InferenceSession.create(model);
  const results = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) {
    const t = results[name];
    out[name] = {type: t.type, dims: t.dims,
                 data: Array.from(t.data, v => typeof v === 'bigint' ? Number(v) : v)};
  }
  process.stdout.write(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
