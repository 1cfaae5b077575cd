// Silero VAD v5's frame loop on an onnxruntime-web module (the worker's
// WebAssembly build; node's in silero.test.ts): each 32 ms chunk at the
// audio context's rate is averaged down to 512 samples at 16 kHz and run
// with the 64 samples before it and the model's state ([2,1,128]; sr int64
// 16000), as silero-vad's OnnxWrapper and vad-web's models/silero.js do.
import type * as Ort from 'onnxruntime-web'
import { downsample, VAD_CONTEXT, VAD_FRAME, VAD_RATE } from './vad'

export class SileroFrames {
  private readonly input = new Float32Array(VAD_CONTEXT + VAD_FRAME)
  private readonly frame = new Float32Array(VAD_FRAME)
  private readonly sr: Ort.Tensor
  private state: Ort.Tensor

  private constructor(
    private readonly ort: typeof Ort,
    private readonly session: Ort.InferenceSession,
  ) {
    this.sr = new ort.Tensor('int64', BigInt64Array.from([BigInt(VAD_RATE)]), [1])
    this.state = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128])
  }

  // load makes a session of the model's bytes on one thread.
  static async load(ort: typeof Ort, model: Uint8Array): Promise<SileroFrames> {
    ort.env.wasm.numThreads = 1
    return new SileroFrames(ort, await ort.InferenceSession.create(model, { executionProviders: ['wasm'] }))
  }

  // run returns the speech probability of the next chunk.
  async run(chunk: Float32Array): Promise<number> {
    downsample(chunk, this.frame)
    this.input.copyWithin(0, VAD_FRAME) // the last 64 samples of the frame before
    this.input.set(this.frame, VAD_CONTEXT)
    const out = await this.session.run({ input: new this.ort.Tensor('float32', this.input.slice(), [1, this.input.length]), state: this.state, sr: this.sr })
    this.state = out['stateN'] as Ort.Tensor
    return Number((out['output'] as Ort.Tensor).data[0] ?? 0)
  }
}
