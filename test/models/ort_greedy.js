// Greedy decoding of a generation fixture by ONNX Runtime, rerunning the
// whole model on the whole prefix at every step (no cache), for the
// prompts of its expected.txt: a second oracle, beside PyTorch's, for the
// tokens that tfm's derived KV cache must give.
//
//   npm install --prefix /tmp/ort onnxruntime-node
//   NODE_PATH=/tmp/ort/node_modules node test/models/ort_greedy.js \
//       test/models/generation/hf_gpt2
//
// Prints one line per prompt, as expected.txt's "greedy PROMPT TOKENS".
const fs = require("fs");
const path = require("path");
const ort = require("onnxruntime-node");

async function main() {
  const dir = process.argv[2];
  const session =
      await ort.InferenceSession.create(path.join(dir, "model.onnx"));
  const expected = fs.readFileSync(path.join(dir, "expected.txt"), "utf8");
  let differ = 0;
  for (const line of expected.split("\n")) {
    const [kind, promptText, tokensText] = line.split(" ");
    if (kind !== "greedy")
      continue;
    const ids = promptText.split(",").map(Number);
    const want = tokensText.split(",").map(Number);
    const got = [];
    while (got.length < want.length) {
      const n = ids.length;
      const feeds = {};
      for (const input of session.inputNames) {
        const values = input === "input_ids" ? ids : ids.map(() => 1);
        feeds[input] = new ort.Tensor(
            "int64", BigInt64Array.from(values.map(BigInt)), [ 1, n ]);
      }
      const out = (await session.run(feeds))[session.outputNames[0]];
      const vocab = out.dims[2];
      const last = out.data.subarray((n - 1) * vocab, n * vocab);
      let best = 0;
      for (let v = 1; v < vocab; ++v)
        if (last[v] > last[best])
          best = v;
      got.push(best);
      ids.push(best);
    }
    const same = got.every((t, i) => t === want[i]);
    differ += same ? 0 : 1;
    console.log(`greedy ${promptText} ${got.join(",")}${
        same ? "" : "  (expected.txt: " + tokensText + ")"}`);
  }
  process.exit(differ ? 1 : 0);
}
main();
