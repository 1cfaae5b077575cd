// The Silero VAD (v5, MIT; the file shipped by @ricky0123/vad-web, the same
// model the room-agent runs) in a Web Worker, on onnxruntime-web's
// single-threaded WebAssembly build (no cross-origin isolation needed; the
// CSP allows compiling WebAssembly with 'wasm-unsafe-eval'). The .wasm and
// .onnx are files of the build (dist/assets), fetched from the gateway:
// nothing comes from elsewhere.
//
// The gate's worklet sends it chunks (one model frame each at the audio
// context's rate) over a MessagePort; it runs each through the model
// (./silero.ts: down to 512 samples at 16 kHz, with the 64 samples before
// it and the model's state), and answers the worklet with the chunk's label (probability and
// whether the person speaks, from ./vad.ts's SpeechDetector) and the page
// with speech's start and end and, every second, what the model cost.
import * as ort from 'onnxruntime-web/wasm'
import wasmUrl from 'onnxruntime-web/ort-wasm-simd-threaded.wasm?url'
import modelUrl from '@ricky0123/vad-web/dist/silero_vad_v5.onnx?url'
import { SileroFrames } from './silero'
import { SpeechDetector } from './vad'
import type { VadChunk, VadLabel } from './gate.worklet'

// What the worker tells the engine.
export type FromVad =
  | { type: 'ready'; loadMs: number }
  | { type: 'error'; message: string }
  | { type: 'edge'; edge: 'start' | 'end'; index: number; prob: number }
  // Per second: frames run, the time each took (ms, from the chunk's
  // arrival to its label sent), the last probability.
  | { type: 'stats'; frames: number; busyMs: number; maxMs: number; times: number[]; prob: number }

const post = (m: FromVad) => self.postMessage(m)

async function load(): Promise<SileroFrames> {
  ort.env.wasm.wasmPaths = { wasm: new URL(wasmUrl, self.location.href).href }
  const model = await fetch(modelUrl)
  if (!model.ok) throw new Error(`the VAD model: HTTP ${model.status}`)
  return SileroFrames.load(ort, new Uint8Array(await model.arrayBuffer()))
}

const t0 = performance.now()
const ready = load()
const detector = new SpeechDetector()
let stats = { frames: 0, busyMs: 0, maxMs: 0, times: [] as number[], since: performance.now() }

ready.then(
  () => post({ type: 'ready', loadMs: performance.now() - t0 }),
  (e: unknown) => post({ type: 'error', message: e instanceof Error ? e.message : String(e) }),
)

async function run(model: SileroFrames, c: VadChunk, port: MessagePort) {
  const start = performance.now()
  const prob = await model.run(c.data)
  const edge = detector.update(prob)
  port.postMessage({ index: c.index, prob, speaking: detector.speaking } satisfies VadLabel)
  if (edge) post({ type: 'edge', edge, index: c.index, prob })
  const ms = performance.now() - start
  stats.frames++
  stats.busyMs += ms
  stats.maxMs = Math.max(stats.maxMs, ms)
  stats.times.push(Math.round(ms * 1000) / 1000)
  if (start - stats.since >= 1000) {
    post({ type: 'stats', frames: stats.frames, busyMs: stats.busyMs, maxMs: stats.maxMs, times: stats.times, prob })
    stats = { frames: 0, busyMs: 0, maxMs: 0, times: [], since: start }
  }
}

let loaded: SileroFrames | null = null
void ready.then((m) => (loaded = m), () => {})

self.onmessage = (e: MessageEvent<{ port: MessagePort }>) => {
  const port = e.data.port
  // One frame at a time, in order: the model's state carries over. Frames
  // that come while the model loads are labelled silence unheard (the gate
  // is open until the model is ready): no backlog to catch up on.
  let queue: Promise<void> = Promise.resolve()
  port.onmessage = (m: MessageEvent<VadChunk>) => {
    const model = loaded
    if (!model) {
      port.postMessage({ index: m.data.index, prob: 0, speaking: false } satisfies VadLabel)
      return
    }
    queue = queue.then(async () => run(model, m.data, port)).catch(() => {})
  }
}
