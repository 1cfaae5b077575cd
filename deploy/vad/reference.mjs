// The reference for the room-agent's Silero VAD (its golden test): the
// speech probability of each 512-sample window of 16 kHz audio, computed
// by the browser package's own Silero wrapper (@ricky0123/vad-web's
// dist/models/silero.js, which follows silero-vad's OnnxWrapper: a
// 64-sample context, the state carried over) on ONNX Runtime for Node.
//
//   node deploy/vad/reference.mjs <audio.s16le>   (16 kHz mono 16-bit little-endian)
//
// prints a JSON array of probabilities, one per whole window.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
// vad-web logs through console.log: to stderr, stdout is the JSON.
console.log = (...a) => console.error(...a)
const ort = require('onnxruntime-node')
const { Silero } = require('@ricky0123/vad-web/dist/models/silero.js')

const pcm = readFileSync(process.argv[2])
const samples = new Int16Array(pcm.buffer, pcm.byteOffset, Math.floor(pcm.length / 2))
const model = readFileSync(require.resolve('@ricky0123/vad-web/dist/silero_vad_v5.onnx'))
const vad = await Silero.new(ort, async () => model)
const probs = []
for (let i = 0; i + 512 <= samples.length; i += 512) {
  const frame = new Float32Array(512)
  for (let j = 0; j < 512; j++) frame[j] = samples[i + j] / 32768
  const { isSpeech } = await vad.process(frame)
  probs.push(isSpeech)
}
process.stdout.write(JSON.stringify(probs))
