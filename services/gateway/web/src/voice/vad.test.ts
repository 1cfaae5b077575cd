import { describe, expect, it } from 'vitest'
import { chunkSize, downsample, SpeechDetector, VAD_FRAME } from './vad'

describe('SpeechDetector', () => {
  it('starts at the positive threshold and ends after the redemption under the negative one', () => {
    const d = new SpeechDetector({ positive: 0.5, negative: 0.35, redemptionFrames: 3 })
    const edges = [0.1, 0.49, 0.5, 0.4, 0.2, 0.2, 0.36, 0.1, 0.1, 0.1, 0.6].map((p) => d.update(p))
    expect(edges).toEqual([undefined, undefined, 'start', undefined, undefined, undefined, undefined, undefined, undefined, 'end', 'start'])
  })

  it('a probability between the thresholds neither starts nor ends speech', () => {
    const d = new SpeechDetector({ positive: 0.5, negative: 0.35, redemptionFrames: 2 })
    for (let i = 0; i < 50; i++) expect(d.update(0.45)).toBeUndefined()
    expect(d.speaking).toBe(false)
    d.update(0.9)
    for (let i = 0; i < 50; i++) expect(d.update(0.4)).toBeUndefined()
    expect(d.speaking).toBe(true)
  })
})

describe('downsample', () => {
  it('makes one 16 kHz frame of a chunk at the context rate', () => {
    expect(chunkSize(48000)).toBe(1536)
    expect(chunkSize(44100)).toBe(1411)
    const ramp = Float32Array.from({ length: 1536 }, (_, i) => i)
    const out = downsample(ramp)
    expect(out.length).toBe(VAD_FRAME)
    expect(out[0]).toBe(1) // mean of 0, 1, 2
    expect(out[511]).toBe(1534)
    const odd = downsample(new Float32Array(1411).fill(0.5))
    expect([...odd].every((v) => v === 0.5)).toBe(true)
  })
})
