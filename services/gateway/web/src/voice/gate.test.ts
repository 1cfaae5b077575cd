import { describe, expect, it } from 'vitest'
import { MicGate, type GateOptions } from './gate'

// Chunks of 4 samples; a block of 2 samples per audio callback. Each
// captured sample's value is its position in the microphone's stream + 1,
// so the output says exactly which samples were sent and in what order.
const O: GateOptions = { chunk: 4, preRollChunks: 3, guardBefore: 1, guardAfter: 1, negative: 0.35, lead: 0.15, leadGuard: 1 }
const BLOCK = 2

class Run {
  readonly gate: MicGate
  private pos = 0
  sent: number[] = []
  constructor(enabled = true, o: GateOptions = O) {
    this.gate = new MicGate(o)
    this.gate.setEnabled(enabled)
  }
  // step captures one chunk (two blocks) and pulls as the worklet does.
  step(): number {
    const index = this.pos / O.chunk
    for (let b = 0; b < O.chunk / BLOCK; b++) {
      const input = Float32Array.from({ length: BLOCK }, () => ++this.pos)
      this.gate.push(input)
      const out = new Float32Array(BLOCK)
      this.gate.pull(out, input)
      this.sent.push(...out.filter((v) => v !== 0))
    }
    return index
  }
}
const samplesOf = (index: number) => [1, 2, 3, 4].map((i) => index * O.chunk + i)

describe('MicGate', () => {
  it('passes everything through when off', () => {
    const r = new Run(false)
    for (let i = 0; i < 5; i++) r.step()
    expect(r.sent).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
  })

  it('sends nothing during non-speech', () => {
    const r = new Run()
    for (let i = 0; i < 10; i++) r.gate.label(r.step(), 0.1, false)
    expect(r.sent).toEqual([])
    expect(r.gate.stats()).toMatchObject({ open: false, delay: 0 })
  })

  it('sends the pre-roll before the onset, then catches up by dropping only non-speech', () => {
    const r = new Run()
    // 0..5 non-speech, 6 the onset (labelled as soon as captured), 7..9
    // speech, 10..13 a pause, 14..16 speech, then the end.
    const prob = [0.1, 0.1, 0.1, 0.1, 0.2, 0.3, 0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.8, 0.8, 0.8, 0.1, 0.1, 0.1, 0.1, 0.1]
    const speaking = (i: number) => i >= 6 && i <= 19
    const delays: number[] = []
    for (let i = 0; i < prob.length; i++) {
      const k = r.step()
      r.gate.label(k, prob[k]!, speaking(k))
      delays.push(r.gate.stats().delay)
    }
    const sentChunks = [...new Set(r.sent.map((v) => Math.floor((v - 1) / O.chunk)))]
    // The pre-roll (3, 4, 5), the onset and the speech in order, the pause's
    // edges (10 after a word, 13 before one) kept, its middle (11, 12)
    // dropped, the word after it, its tail (17); 18 dropped; 19 sent as it
    // was captured, the delay gone (its label comes after it left: with no
    // delay what the VAD has not judged yet passes, until the detector's
    // end closes the gate); nothing after that end.
    expect(sentChunks).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16, 17, 19])
    for (const c of sentChunks) expect(r.sent.filter((v) => Math.floor((v - 1) / O.chunk) === c)).toEqual(samplesOf(c))
    // Only non-speech was dropped.
    const dropped = Array.from({ length: prob.length }, (_, i) => i).filter((i) => i > 6 && !sentChunks.includes(i) && i <= 19)
    expect(dropped).toEqual([11, 12, 18])
    for (const d of dropped) expect(prob[d]!).toBeLessThan(O.negative)
    // The delay: the pre-roll when the gate opened, back to nothing after.
    // (the pre-roll and the onset chunk itself, not sent yet).
    expect(delays[6]).toBe((3 + 1) * O.chunk)
    expect(delays.at(-1)).toBe(0)
    expect(r.gate.stats().open).toBe(false)
  })

  it('starts the pre-roll where speech rises, with a guard, within its limit', () => {
    for (const c of [
      // The rise (0.2, 0.3) and one chunk before it.
      { prob: [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.3, 0.9], first: 5 },
      // No rise: the guard alone.
      { prob: [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.9], first: 7 },
      // Rising from before the window (noise near the threshold): the whole window.
      { prob: [0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.9], first: 2 },
    ]) {
      const r = new Run(true, { ...O, preRollChunks: 6 })
      c.prob.forEach((p, i) => r.gate.label(r.step(), p, i === c.prob.length - 1))
      for (let i = 0; i < 3; i++) r.gate.label(r.step(), 0.9, true)
      expect(Math.floor((r.sent[0]! - 1) / O.chunk), JSON.stringify(c.prob)).toBe(c.first)
      expect(r.sent).toEqual(Array.from({ length: r.sent.length }, (_, i) => c.first * O.chunk + i + 1))
    }
  })

  it('keeps the whole pre-roll when the labels come late', () => {
    const r = new Run(true, { ...O, preRollChunks: 6, leadGuard: 6 })
    for (let i = 0; i < 30; i++) r.step()
    // Chunks 0..29 captured; the labels of 0..20 come now, 20 the onset.
    for (let k = 0; k <= 20; k++) r.gate.label(k, k === 20 ? 0.9 : 0.1, k === 20)
    r.step()
    expect(r.sent.slice(0, 4)).toEqual(samplesOf(14))
  })

  it('never drops a chunk whose neighbours are not labelled yet', () => {
    const r = new Run()
    for (let i = 0; i < 4; i++) r.gate.label(r.step(), 0.1, false)
    r.gate.label(r.step(), 0.9, true) // 4: onset
    // 5 and 6 are captured; only 5 is labelled (non-speech): 6 may be the
    // next word's start, so 5 stays.
    r.step()
    r.gate.label(5, 0.1, true)
    r.step()
    r.step()
    expect(r.sent.slice(-4)).not.toEqual([])
    expect(r.gate.stats().dropped).toBe(0)
  })

  it('opens again for the next utterance without sending anything twice', () => {
    const r = new Run()
    const prob = [0.1, 0.9, 0.9, 0.1, 0.1, 0.9, 0.9, 0.1, 0.1, 0.1]
    const speaking = [false, true, true, false, false, true, true, false, false, false]
    for (let i = 0; i < prob.length; i++) r.gate.label(r.step(), prob[i]!, speaking[i]!)
    expect(new Set(r.sent).size).toBe(r.sent.length)
    expect(r.sent).toEqual([...r.sent].sort((a, b) => a - b))
    // Both utterances' speech went out.
    for (const c of [1, 2, 5, 6]) expect(r.sent).toEqual(expect.arrayContaining(samplesOf(c)))
  })
})
