// The in-page VAD's model loop on real audio: onnxruntime-web's WebAssembly
// build in node, the Silero model the build ships, espeak-ng's speech mixed
// with the noise of the browser test (sox -R: the same bytes every run).
import * as ort from 'onnxruntime-web'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Silero } from '@ricky0123/vad-web/dist/models/silero.js'
import { SileroFrames } from './silero'
import { chunkSize, downsample, SpeechDetector, VAD_FRAME } from './vad'

// The tests run in Node; the app's tsconfig has no Node types, so the
// few functions used here are declared by hand (as in codec.test.ts).
interface Node {
  execFileSync(file: string, args: string[], opts?: { stdio: string[] }): unknown
  mkdtempSync(prefix: string): string
  readFileSync(path: string): Uint8Array
  rmSync(path: string, opts: { recursive: boolean; force: boolean }): void
  tmpdir(): string
}
const builtin = (id: string) => (globalThis as unknown as { process: { getBuiltinModule(id: string): unknown } }).process.getBuiltinModule(id) as Node
const { execFileSync } = builtin('node:child_process')
const { mkdtempSync, readFileSync, rmSync } = builtin('node:fs')
const { tmpdir } = builtin('node:os')
const join = (...p: string[]) => p.join('/')

const RATE = 48000
const dir = mkdtempSync(join(tmpdir(), 'alicia-vad-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// pcm reads a 16-bit mono WAV as floats.
function pcm(file: string): Float32Array {
  const b = readFileSync(file)
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength)
  const tag = (o: number) => String.fromCharCode(...b.subarray(o, o + 4))
  let off = 12
  while (tag(off) !== 'data') off += 8 + v.getUint32(off + 4, true)
  const n = v.getUint32(off + 4, true) / 2
  return Float32Array.from({ length: n }, (_, i) => v.getInt16(off + 8 + 2 * i, true) / 32768)
}

const sox = (...args: string[]) => execFileSync('sox', ['-R', ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
let speech: Float32Array
let noise: Float32Array

beforeAll(() => {
  execFileSync('espeak-ng', ['-v', 'en-us', '-w', join(dir, 'q.wav'), 'What is the weather like in Paris tomorrow?'])
  sox(join(dir, 'q.wav'), '-r', String(RATE), '-b', '16', '-c', '1', join(dir, 'speech.wav'))
  sox('-n', '-r', String(RATE), '-c', '1', '-b', '16', join(dir, 'noise.wav'), 'synth', '6', 'pinknoise', 'vol', '0.1', 'tremolo', '0.7', '60')
  speech = pcm(join(dir, 'speech.wav'))
  noise = pcm(join(dir, 'noise.wav'))
})

const MODEL = 'node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx'

// probs runs the model over audio chunk by chunk (n samples each).
async function probs(audio: Float32Array, n = chunkSize(RATE)): Promise<number[]> {
  const model = await SileroFrames.load(ort, new Uint8Array(readFileSync(MODEL)))
  const out: number[] = []
  for (let i = 0; i + n <= audio.length; i += n) out.push(await model.run(audio.slice(i, i + n)))
  return out
}

describe('SileroFrames', () => {
  it("gives vad-web's Silero probabilities, frame for frame", async () => {
    // The same 16 kHz frames (the noisy question, downsampled) through
    // vad-web's own loop (the reference the brief names) and ours.
    const mix = new Float32Array(speech.length + RATE)
    mix.set(noise.subarray(0, mix.length))
    speech.forEach((v, i) => (mix[RATE / 2 + i]! += v))
    const n = chunkSize(RATE)
    const frames: Float32Array[] = []
    for (let i = 0; i + n <= mix.length; i += n) frames.push(downsample(mix.subarray(i, i + n)))
    const ref = await Silero.new(ort, async () => readFileSync(MODEL).slice().buffer as ArrayBuffer)
    const want: number[] = []
    for (const f of frames) want.push((await ref.process(f)).isSpeech)
    const got = await probs(Float32Array.from(frames.flatMap((f) => [...f])), VAD_FRAME)
    expect(got.length).toBe(want.length)
    got.forEach((p, i) => expect(Math.abs(p - want[i]!), `frame ${i}`).toBeLessThan(1e-5))
    expect(Math.max(...want)).toBeGreaterThan(0.9)
  })

  it('hears no speech in noise alone', async () => {
    const p = await probs(noise)
    const d = new SpeechDetector()
    expect(p.map((x) => d.update(x)).filter(Boolean)).toEqual([])
    expect(Math.max(...p)).toBeLessThan(0.5)
  })

  it('hears the speech in the noise from its start to its end', async () => {
    // 2 s of noise, then the question in it, then 1 s more of it.
    const lead = 2 * RATE
    const mix = new Float32Array(lead + speech.length + RATE)
    mix.set(noise.subarray(0, mix.length))
    speech.forEach((v, i) => (mix[lead + i]! += v))
    const p = await probs(mix)
    const d = new SpeechDetector()
    const edges = p.map((x, i) => ({ edge: d.update(x), ms: i * 32 }))
    const starts = edges.filter((e) => e.edge === 'start')
    expect(starts.length, JSON.stringify(p.map((x) => x.toFixed(2)))).toBe(1)
    // espeak-ng's speech starts a few tens of ms into its file.
    const first = speech.findIndex((v) => Math.abs(v) > 0.02) / RATE * 1000
    expect(starts[0]!.ms).toBeGreaterThanOrEqual(2000 + first - 64)
    expect(starts[0]!.ms).toBeLessThan(2000 + first + 250)
    // It ends once, after the last word and the detector's 512 ms.
    const last = (speech.length - [...speech].reverse().findIndex((v) => Math.abs(v) > 0.02)) / RATE * 1000
    const ends = edges.filter((e) => e.edge === 'end')
    expect(ends.length).toBe(1)
    expect(ends[0]!.ms).toBeGreaterThan(2000 + last)
    expect(ends[0]!.ms).toBeLessThan(2000 + last + 512 + 300)
    expect(Math.max(...p)).toBeGreaterThan(0.9)
  })
})
