// The microphone gate on the audio thread (an AudioWorklet between the
// microphone's gain and the published track): it cuts the microphone into
// VAD frames for ./vad.worker.ts (through a MessagePort, never the page's
// main thread), applies the worker's labels to ./gate.ts's MicGate and
// writes what the gate lets through. Every 100 ms it tells the engine its
// counters. Loaded by engine.ts with addModule (built by Vite as a worker).
import { MicGate } from './gate'
import { chunkSize } from './vad'

// The AudioWorkletGlobalScope's names (not in TypeScript's DOM library).
declare const sampleRate: number
declare class AudioWorkletProcessor {
  readonly port: MessagePort
}
declare function registerProcessor(name: string, ctor: new (opts: { processorOptions?: GateProcessorOptions }) => AudioWorkletProcessor): void

export interface GateProcessorOptions {
  preRollMs: number
  leadGuardMs: number
  guardBeforeMs: number
  guardAfterMs: number
  negative: number
  lead: number
}

// What the worklet and the engine say to each other over its port.
export type ToGate = { type: 'vad'; port: MessagePort } | { type: 'enabled'; on: boolean }
export interface GateReport {
  type: 'gate'
  open: boolean
  enabled: boolean
  sentMs: number
  droppedMs: number
  delayMs: number
}
// A chunk for the VAD, and the VAD's label of it.
export interface VadChunk {
  index: number
  data: Float32Array
}
export interface VadLabel {
  index: number
  prob: number
  speaking: boolean
}

class GateProcessor extends AudioWorkletProcessor {
  private readonly gate: MicGate
  private vad: MessagePort | null = null
  private silence = new Float32Array(128)
  private sinceStats = 0

  constructor(opts: { processorOptions?: GateProcessorOptions }) {
    super()
    const o = opts.processorOptions ?? { preRollMs: 480, leadGuardMs: 96, guardBeforeMs: 64, guardAfterMs: 32, negative: 0.35, lead: 0.15 }
    const chunk = chunkSize(sampleRate)
    const chunks = (ms: number) => Math.round((ms / 1000) * sampleRate / chunk)
    this.gate = new MicGate({ chunk, preRollChunks: chunks(o.preRollMs), guardBefore: chunks(o.guardBeforeMs), guardAfter: chunks(o.guardAfterMs),
      negative: o.negative, lead: o.lead, leadGuard: chunks(o.leadGuardMs) })
    this.port.onmessage = (e: MessageEvent<ToGate>) => {
      const m = e.data
      if (m.type === 'vad') {
        this.vad = m.port
        this.vad.onmessage = (l: MessageEvent<VadLabel>) => this.gate.label(l.data.index, l.data.prob, l.data.speaking)
      } else this.gate.setEnabled(m.on)
    }
  }

  process(inputs: Float32Array[][], outputs: Float32Array[][]): boolean {
    const out = outputs[0] ?? []
    const first = out[0]
    const n = first?.length ?? 128
    if (this.silence.length !== n) this.silence = new Float32Array(n)
    const input = inputs[0]?.[0] ?? this.silence
    for (const c of this.gate.push(input)) {
      const data = c.data.slice()
      this.vad?.postMessage({ index: c.index, data } satisfies VadChunk, [data.buffer])
    }
    if (first) {
      this.gate.pull(first, input)
      for (let ch = 1; ch < out.length; ch++) out[ch]!.set(first)
    }
    this.sinceStats += n
    if (this.sinceStats >= sampleRate / 10) {
      this.sinceStats = 0
      const s = this.gate.stats()
      const ms = (x: number) => (x / sampleRate) * 1000
      this.port.postMessage({ type: 'gate', open: s.open, enabled: this.gate.enabled, sentMs: ms(s.sent), droppedMs: ms(s.dropped), delayMs: ms(s.delay) } satisfies GateReport)
    }
    return true
  }
}

registerProcessor('alicia-mic-gate', GateProcessor)
