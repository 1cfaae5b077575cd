// The in-page voice activity detector's pure parts: the frame format of the
// Silero VAD model (512 samples at 16 kHz, 32 ms), the resampling of the
// microphone's chunks to it, and the state machine that turns the model's
// speech probability into speech starting and ending. The model runs in
// ./vad.worker.ts; these parts are tested in node (vad.test.ts).

// The model's frame and rate; every frame is run with the last CONTEXT
// samples of the one before prepended (as silero-vad's OnnxWrapper does).
export const VAD_RATE = 16000
export const VAD_FRAME = 512
export const VAD_CONTEXT = 64
export const FRAME_MS = (VAD_FRAME / VAD_RATE) * 1000

// chunkSize: how many samples of the audio context make one model frame
// (1536 at 48 kHz; at 44.1 kHz 1411, which resampled to 512 is 16.008 kHz).
export function chunkSize(contextRate: number): number {
  return Math.round((contextRate * VAD_FRAME) / VAD_RATE)
}

// downsample averages input (one chunk at the context's rate) into
// VAD_FRAME samples: a box filter over each output sample's span, enough
// against aliasing for a speech detector.
export function downsample(input: Float32Array, out: Float32Array = new Float32Array(VAD_FRAME)): Float32Array {
  const r = input.length / out.length
  for (let i = 0; i < out.length; i++) {
    const a = Math.floor(i * r)
    const b = Math.max(a + 1, Math.floor((i + 1) * r))
    let s = 0
    for (let j = a; j < b; j++) s += input[j] ?? 0
    out[i] = s / (b - a)
  }
  return out
}

export interface DetectorOptions {
  // A frame at or above positive starts speech.
  positive: number
  // Speech ends after redemptionFrames frames in a row under negative.
  negative: number
  redemptionFrames: number
}

// The thresholds of vad-web's and LiveKit's Silero defaults (0.5 and 0.35,
// the hysteresis between them); the redemption is the pause between words
// the panel keeps calling speech (the energy meter's hangover was 600 ms).
export const DEFAULT_DETECTOR: DetectorOptions = { positive: 0.5, negative: 0.35, redemptionFrames: 16 }

// SpeechDetector follows one stream of frame probabilities.
export class SpeechDetector {
  speaking = false
  private quiet = 0

  constructor(readonly opts: DetectorOptions = DEFAULT_DETECTOR) {}

  // update takes the next frame's probability and says whether speech
  // started or ended with it.
  update(prob: number): 'start' | 'end' | undefined {
    if (!this.speaking) {
      if (prob >= this.opts.positive) {
        this.speaking = true
        this.quiet = 0
        return 'start'
      }
      return undefined
    }
    if (prob >= this.opts.negative) {
      this.quiet = 0
      return undefined
    }
    if (++this.quiet >= this.opts.redemptionFrames) {
      this.speaking = false
      this.quiet = 0
      return 'end'
    }
    return undefined
  }

  reset() {
    this.speaking = false
    this.quiet = 0
  }
}
