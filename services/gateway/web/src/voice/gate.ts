// MicGate: "send the microphone only while I speak". It sits between the
// microphone and the published track (in ./gate.worklet.ts, on the audio
// thread) and is pure, so its rules are tested in node (gate.test.ts).
//
// The microphone is cut into chunks of one VAD frame each (32 ms at the
// context's rate); the VAD (./vad.worker.ts) labels each chunk with its
// speech probability and whether the person is speaking, some milliseconds
// after the chunk was captured.
//
//   - Closed (no speech): the output is silence (zeros); the last
//     preRollChunks chunks are kept.
//   - Opening (the label of chunk k says speech started): the output plays
//     the kept chunks from the start of the pre-roll on, then everything
//     captured since, in order: the first syllable, which the VAD hears
//     late, is sent, delayed by the pre-roll. The pre-roll starts leadGuard
//     chunks before the run of chunks up to k whose probability is at least
//     lead (where speech rises), and at most preRollChunks before k: the
//     clearly non-speech start of the window is not sent, so the delay is
//     only what the first syllable needs.
//   - Catching up: while that delay lasts, a chunk the VAD calls non-speech
//     (under the negative threshold), after the onset, with no speech within
//     guardBefore chunks before it nor guardAfter after it (the ends of
//     words), is dropped instead of sent: the pauses of the utterance and
//     the time after it take the delay back to nothing. A chunk is only
//     dropped once its neighbours' labels are known, and pre-roll is never
//     dropped.
//   - Closing (the label of chunk c says speech ended, after the detector's
//     redemption): chunks after c are not sent; what is queued plays out
//     (its non-speech dropped), then silence again.
//
// Off (enabled false), the output is the input, sample for sample.
// How many chunks the VAD's labels may lag behind the microphone without
// the pre-roll losing its start (about a second).
const LATE_CHUNKS = 32

export interface GateOptions {
  chunk: number // samples per chunk (one VAD frame at the context's rate)
  preRollChunks: number
  guardBefore: number
  guardAfter: number
  negative: number // under this probability a chunk is non-speech
  lead: number // from this probability a chunk before the onset is speech rising
  leadGuard: number // chunks kept before the rise
}

interface Chunk {
  index: number
  data: Float32Array
  filled: number
  read: number
  prob?: number
  done?: boolean // sent or dropped: never queued again
}

export interface GateStats {
  open: boolean
  // Samples of the microphone sent, dropped by the catch-up, and the
  // output's delay behind the microphone now (samples queued).
  sent: number
  dropped: number
  delay: number
}

export class MicGate {
  enabled = false
  private readonly history = new Map<number, Chunk>()
  private queue: Chunk[] = []
  private current: Chunk | null = null
  private next = 0
  private open = false
  private onset = -1
  private closeAfter = Infinity
  sent = 0
  dropped = 0

  constructor(readonly o: GateOptions) {}

  // push captures input; it returns the chunks it completed, for the VAD
  // (their data is the gate's own: copy it before transferring it).
  push(input: Float32Array): { index: number; data: Float32Array }[] {
    const done: { index: number; data: Float32Array }[] = []
    let i = 0
    while (i < input.length) {
      if (!this.current) this.startChunk()
      const c = this.current!
      const n = Math.min(input.length - i, this.o.chunk - c.filled)
      c.data.set(input.subarray(i, i + n), c.filled)
      c.filled += n
      i += n
      if (c.filled === this.o.chunk) {
        done.push({ index: c.index, data: c.data })
        this.current = null
      }
    }
    return done
  }

  private startChunk() {
    const c: Chunk = { index: this.next++, data: new Float32Array(this.o.chunk), filled: 0, read: 0 }
    this.current = c
    this.history.set(c.index, c)
    // Enough for the pre-roll and the guards of what is still queued, with
    // labels up to a second late (a busy machine: the worker waits for a CPU).
    const keep = this.o.preRollChunks + this.o.guardBefore + LATE_CHUNKS
    const oldest = this.queue[0]?.index ?? c.index
    for (const k of this.history.keys()) if (k < Math.min(c.index - keep, oldest - this.o.guardBefore)) this.history.delete(k)
    if (this.open && c.index <= this.closeAfter) this.queue.push(c)
  }

  // label is the VAD's verdict on chunk index: its probability and
  // whether the person is speaking at its end.
  label(index: number, prob: number, speaking: boolean) {
    const c = this.history.get(index)
    if (c) c.prob = prob
    if (!this.enabled) return
    if (speaking && (!this.open || index > this.closeAfter)) {
      this.open = true
      this.onset = index
      this.closeAfter = Infinity
      const queued = new Set(this.queue.map((q) => q.index))
      let rise = index
      while (rise > index - this.o.preRollChunks && (this.history.get(rise - 1)?.prob ?? 1) >= this.o.lead) rise--
      const from = Math.max(index - this.o.preRollChunks, rise - this.o.leadGuard)
      for (let k = from; k < this.next; k++) {
        const h = this.history.get(k)
        if (h && !h.done && !queued.has(k)) this.queue.push(h)
      }
      this.queue.sort((a, b) => a.index - b.index)
    } else if (!speaking && this.open && this.closeAfter === Infinity) {
      this.closeAfter = index
      this.queue = this.queue.filter((q) => q.index <= index)
    }
  }

  // setEnabled turns the gate on (closed until speech) or off (all passes).
  setEnabled(on: boolean) {
    if (on === this.enabled) return
    this.enabled = on
    this.open = false
    this.onset = -1
    this.closeAfter = Infinity
    this.queue = []
  }

  // pull writes the output for the input last pushed: out.length samples.
  pull(out: Float32Array, input: Float32Array) {
    if (!this.enabled) {
      out.set(input.subarray(0, out.length))
      this.sent += out.length
      return
    }
    let i = 0
    while (i < out.length) {
      const h = this.queue[0]
      if (!h) break
      if (h.read === 0 && h.filled === this.o.chunk && this.droppable(h)) {
        this.queue.shift()
        h.done = true
        this.dropped += h.filled
        continue
      }
      const n = Math.min(out.length - i, h.filled - h.read)
      if (n > 0) {
        out.set(h.data.subarray(h.read, h.read + n), i)
        h.read += n
        i += n
        this.sent += n
      }
      if (h.read === this.o.chunk) {
        this.queue.shift()
        h.done = true
      } else if (n === 0) break // caught up with the microphone
    }
    out.fill(0, i)
    if (this.open && this.closeAfter !== Infinity && this.queue.length === 0) {
      this.open = false
      this.onset = -1
    }
  }

  private speech(index: number): boolean | undefined {
    if (index > this.closeAfter) return false
    const p = this.history.get(index)?.prob
    return p === undefined ? undefined : p >= this.o.negative
  }

  private droppable(c: Chunk): boolean {
    if (c.index <= this.onset || this.speech(c.index) !== false) return false
    for (let k = c.index - this.o.guardBefore; k < c.index; k++) if (k >= this.onset && this.speech(k) !== false) return false
    for (let k = c.index + 1; k <= c.index + this.o.guardAfter; k++) if (this.speech(k) !== false) return false
    return true
  }

  stats(): GateStats {
    let delay = 0
    for (const q of this.queue) delay += q.filled - q.read
    return { open: this.open, sent: this.sent, dropped: this.dropped, delay }
  }
}
