// The voice session: joins the conversation's LiveKit room with the token
// the gateway gives, sends the microphone, plays Alicia's answer, and tells
// the page what is happening. Loaded on the first press of the microphone
// (it brings livekit-client), never with the page.
//
// The microphone goes through WebAudio (source → gain → the published
// track), so mute and push-to-talk send silence instead of stopping the
// track: the room-agent's end-pointer needs the silence to end a turn, and
// device changes swap the source without publishing again. Envelopes still
// come over the page's WebSocket; from the data channel the page takes only
// the room-agent's playout marks (SentencePlayout), which say which sentence
// is being heard.
//
// What goes wrong is told in one sentence with its fix (./preflight.ts):
// the page's origin is checked before anything else, the microphone's and
// the room's errors are classified by the step they came from, and a room
// whose signalling connected but whose media (ICE) did not is 'media-blocked'.
import { DisconnectReason, Room, RoomEvent, Track, type RemoteParticipant, type RemoteTrack } from 'livekit-client'
import { api } from '../api'
import { decodeEnvelope, MessageType, type Transcription } from '../protocol'
import { useApp } from '../store/app'
import {
  classifyError, currentBrowser, disconnectProblem, isCancelled, originProblem, VoiceTimeoutError,
  type VoiceProblem, type VoiceStage,
} from './preflight'
import { initialVoice, phaseOf, useVoice } from './store'
import type { GateProcessorOptions, GateReport, ToGate } from './gate.worklet'
import gateWorkletUrl from './gate.worklet.ts?worker&url'
import type { FromVad } from './vad.worker'

const AGENT = 'alicia-agent'
// Levels (dBFS of 20 ms windows) that count as speech: the person's after
// the browser's processing, Alicia's as played.
const USER_DB = -48
const AGENT_DB = -50
// How long a level must stay under its threshold before speech counts as
// over (pauses between words).
const USER_HANGOVER_MS = 600
const AGENT_HANGOVER_MS = 400
const TICK_MS = 20
// How long the media (ICE) may take once signalling is up, and the guard
// over livekit-client's own timeouts for the whole join.
const MEDIA_TIMEOUT_MS = 12_000
const JOIN_TIMEOUT_MS = 30_000
// The gate's pre-roll (audio from before the VAD heard speech start, sent
// with it: at most 480 ms, from 96 ms before the probability rose over
// 0.15) and the guards around words its catch-up never drops (./gate.ts).
const GATE: GateProcessorOptions = { preRollMs: 480, leadGuardMs: 96, guardBeforeMs: 64, guardAfterMs: 32, negative: 0.35, lead: 0.15 }

// StageFailure tags an error with the step it came from: the microphone
// and the token are asked for at once.
class StageFailure {
  constructor(
    readonly stage: VoiceStage,
    readonly error: unknown,
  ) {}
}

function staged<T>(stage: VoiceStage, p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    throw new StageFailure(stage, e)
  })
}

// joinRoom connects room and says which steps it got through: signalling
// (RoomEvent.SignalConnected), then the media (room.connect resolves once
// its peer connection is up). A join that neither succeeds nor fails in
// JOIN_TIMEOUT_MS fails with VoiceTimeoutError.
async function joinRoom(room: Room, url: string, token: string, progress: { signal: boolean }): Promise<void> {
  const onSignal = () => {
    progress.signal = true
  }
  room.once(RoomEvent.SignalConnected, onSignal)
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    await Promise.race([
      staged('signal', room.connect(url, token, { autoSubscribe: true, peerConnectionTimeout: MEDIA_TIMEOUT_MS })),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          void room.disconnect()
          reject(new StageFailure('signal', new VoiceTimeoutError(`no connection within ${JOIN_TIMEOUT_MS / 1000} s`)))
        }, JOIN_TIMEOUT_MS)
      }),
    ])
  } finally {
    clearTimeout(timer)
    room.off(RoomEvent.SignalConnected, onSignal)
  }
}

// toProblem: what a failed start or test caught, as the sentence to show
// (undefined: the page cancelled it).
function toProblem(e: unknown, signalConnected: boolean, serverUrl?: string): VoiceProblem | undefined {
  const stage = e instanceof StageFailure ? e.stage : 'session'
  const err = e instanceof StageFailure ? e.error : e
  if (isCancelled(err)) return undefined
  return classifyError(err, {
    stage: stage === 'signal' && signalConnected ? 'media' : stage,
    signalConnected,
    serverUrl,
    pageProtocol: location.protocol,
    hostname: location.hostname,
  })
}

// A voice event, for the page's own timing (latency figures) and tests:
// dispatched on window as 'alicia:voice'.
export interface VoiceEvent {
  // user-speech-*: the microphone's level; vad-speech-*: the in-page VAD
  // (what the panel's state follows once the VAD runs).
  // not-addressed: hands-free speech the room-agent heard but did not take
  // (a Transcription{addressed: false} on the data channel; ./HandsFree.tsx).
  kind: 'listening' | 'user-speech-start' | 'user-speech-end' | 'agent-audio-start' | 'agent-audio-end' | 'vad-ready' | 'vad-speech-start' | 'vad-speech-end' | 'not-addressed'
  // performance.now() of the moment, estimated to the sample.
  at: number
}

function emit(e: VoiceEvent) {
  window.dispatchEvent(new CustomEvent<VoiceEvent>('alicia:voice', { detail: e }))
}

// The VAD's and the gate's counters, for tests and measurements: dispatched
// on window as 'alicia:vad' (the worker's per-second cost, the gate's
// counters every 100 ms).
export type VadReport = Extract<FromVad, { type: 'stats' }> | GateReport

function report(r: VadReport) {
  window.dispatchEvent(new CustomEvent<VadReport>('alicia:vad', { detail: r }))
}

// Meter measures one signal: the level of the last window and, when speech
// starts or ends, when exactly (the first or last loud sample).
class Meter {
  private buf: Float32Array<ArrayBuffer>
  private loudUntil = -Infinity
  speaking = false
  level = 0

  constructor(
    readonly node: AnalyserNode,
    private readonly db: number,
    private readonly hangover: number,
  ) {
    node.fftSize = 1024
    this.buf = new Float32Array(node.fftSize)
  }

  // tick returns 'start' or 'end' with the moment it happened.
  tick(now: number, rate: number): { edge: 'start' | 'end'; at: number } | undefined {
    this.node.getFloatTimeDomainData(this.buf)
    const amp = 10 ** (this.db / 20)
    let sum = 0
    let first = -1
    let last = -1
    for (let i = 0; i < this.buf.length; i++) {
      const v = this.buf[i] ?? 0
      sum += v * v
      if (Math.abs(v) > amp * 1.41) {
        if (first < 0) first = i
        last = i
      }
    }
    const rms = Math.sqrt(sum / this.buf.length)
    this.level = Math.min(1, Math.max(0, (20 * Math.log10(rms + 1e-9) + 60) / 60))
    const loud = 20 * Math.log10(rms + 1e-9) > this.db
    const ago = (i: number) => ((this.buf.length - i) / rate) * 1000
    if (loud) {
      this.loudUntil = now - ago(last)
      if (!this.speaking) {
        this.speaking = true
        return { edge: 'start', at: now - ago(Math.max(first, 0)) }
      }
    } else if (this.speaking && now - this.loudUntil > this.hangover) {
      this.speaking = false
      return { edge: 'end', at: this.loudUntil }
    }
    return undefined
  }
}

export class VoiceEngine {
  private room: Room | null = null
  private ctx: AudioContext | null = null
  private stream: MediaStream | null = null
  private source: MediaStreamAudioSourceNode | null = null
  private gain: GainNode | null = null
  // The gate between the gain and the published track (null when the
  // browser has no AudioWorklet: the gain is sent as it is), and the VAD.
  private gate: AudioWorkletNode | null = null
  private vad: Worker | null = null
  private vadSpeaking = false
  private mic: Meter | null = null
  private agent: Meter | null = null
  private agentEl: HTMLMediaElement | null = null
  private timer: ReturnType<typeof setInterval> | undefined
  private stopped = false
  // joined: the room is connected (signalling and media); connected: the
  // microphone is published too.
  private joined = false
  private connected = false

  constructor(readonly conversationId: string) {}

  async start(deviceId?: string): Promise<void> {
    const t0 = performance.now()
    useVoice.setState({ ...initialVoice, phase: 'connecting', conversationId: this.conversationId, startedAt: t0,
      pushToTalk: useVoice.getState().pushToTalk, sendOnlySpeech: useVoice.getState().sendOnlySpeech, deviceId })
    const insecure = originProblem(currentBrowser())
    if (insecure) {
      this.fail(insecure)
      return
    }
    const progress = { signal: false }
    let serverUrl: string | undefined
    try {
      // The microphone and the token in parallel: both wait on something
      // else (the permission prompt, the gateway).
      const [token] = await Promise.all([
        staged('token', api.roomToken(this.conversationId)),
        staged('microphone', this.openMicrophone(deviceId)),
      ])
      if (this.stopped) return
      serverUrl = token.url
      const room = new Room({ adaptiveStream: false, dynacast: false, disconnectOnPageLeave: true })
      this.room = room
      room.on(RoomEvent.TrackSubscribed, (track, _pub, p) => this.onTrack(track, p))
      room.on(RoomEvent.DataReceived, (payload, p) => this.onData(payload, p))
      room.on(RoomEvent.AudioPlaybackStatusChanged, () => useVoice.setState({ needsClick: !room.canPlaybackAudio }))
      room.on(RoomEvent.Disconnected, (reason?: DisconnectReason) => {
        // Before the join resolves, its rejection says what went wrong.
        if (this.stopped || !this.joined) return
        const p = disconnectProblem(reason === undefined ? undefined : DisconnectReason[reason])
        if (p) this.fail(p)
      })
      await joinRoom(room, token.url, token.token, progress)
      if (this.stopped) return
      this.joined = true
      const track = this.published()
      await staged('publish', room.localParticipant.publishTrack(track, { source: Track.Source.Microphone, name: 'microphone', dtx: false, red: false }))
      if (this.stopped) return
      this.connected = true
      const at = performance.now()
      useVoice.setState({ listeningAt: at, needsClick: !room.canPlaybackAudio })
      emit({ kind: 'listening', at })
      void this.listDevices()
      this.startVadWorker()
      this.timer = setInterval(() => this.tick(), TICK_MS)
      this.applyGain()
    } catch (e) {
      if (this.stopped) return
      const p = toProblem(e, progress.signal, serverUrl)
      if (p) this.fail(p)
      else this.stop()
    }
  }

  private async openMicrophone(deviceId?: string) {
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { deviceId: deviceId ? { exact: deviceId } : undefined, echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    })
    if (this.stopped) {
      stream.getTracks().forEach((t) => t.stop())
      return
    }
    if (!this.ctx) {
      this.ctx = new AudioContext({ latencyHint: 'interactive' })
      this.gain = this.ctx.createGain()
      const an = this.ctx.createAnalyser()
      this.gate = await this.startGate(this.ctx)
      if (this.gate) {
        this.gain.connect(this.gate)
        this.gate.connect(an)
      } else this.gain.connect(an)
      this.mic = new Meter(an, USER_DB, USER_HANGOVER_MS)
    }
    await this.ctx.resume()
    this.source?.disconnect()
    this.stream?.getTracks().forEach((t) => t.stop())
    this.stream = stream
    this.source = this.ctx.createMediaStreamSource(stream)
    this.source.connect(this.gain!)
  }

  // startGate loads the gate's worklet (small; on the audio thread). The
  // VAD's worker starts once the call is up (startVadWorker): compiling its
  // WebAssembly and loading the model take the machine for a while, and
  // nothing of it must delay the microphone or the answer's first sound.
  // Until the model is ready (or if it fails) the panel follows the level
  // and the gate lets everything through.
  private async startGate(ctx: AudioContext): Promise<AudioWorkletNode | null> {
    if (!ctx.audioWorklet || typeof Worker === 'undefined') {
      useVoice.setState({ vad: 'failed' })
      return null
    }
    try {
      useVoice.setState({ vad: 'loading' })
      await ctx.audioWorklet.addModule(gateWorkletUrl)
      const node = new AudioWorkletNode(ctx, 'alicia-mic-gate', { numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1], processorOptions: GATE })
      node.port.onmessage = (e: MessageEvent<GateReport>) => {
        report(e.data)
        if (e.data.open !== useVoice.getState().gateOpen) useVoice.setState({ gateOpen: e.data.open })
      }
      return node
    } catch {
      useVoice.setState({ vad: 'failed' })
      return null
    }
  }

  // startVadWorker starts the VAD in its worker and joins it to the gate by
  // a MessagePort (audio never passes the main thread).
  private startVadWorker() {
    if (!this.gate || this.vad) return
    try {
      const vad = new Worker(new URL('./vad.worker.ts', import.meta.url), { type: 'module', name: 'alicia-vad' })
      this.vad = vad
      vad.onmessage = (e: MessageEvent<FromVad>) => this.onVad(e.data)
      vad.onerror = () => this.onVad({ type: 'error', message: 'the VAD worker failed' })
      const ch = new MessageChannel()
      this.gate.port.postMessage({ type: 'vad', port: ch.port1 } satisfies ToGate, [ch.port1])
      vad.postMessage({ port: ch.port2 }, [ch.port2])
    } catch {
      useVoice.setState({ vad: 'failed' })
    }
  }

  private onVad(m: FromVad) {
    switch (m.type) {
      case 'ready':
        useVoice.setState({ vad: 'ready' })
        emit({ kind: 'vad-ready', at: performance.now() })
        this.applyGate()
        break
      case 'error':
        this.vadSpeaking = false
        useVoice.setState({ vad: 'failed' })
        this.applyGate()
        break
      case 'edge':
        this.vadSpeaking = m.edge === 'start'
        emit({ kind: m.edge === 'start' ? 'vad-speech-start' : 'vad-speech-end', at: performance.now() })
        this.tick()
        break
      case 'stats':
        report(m)
        break
    }
  }

  // applyGate: the gate closes the microphone between utterances only when
  // asked to and the VAD runs; otherwise everything is sent.
  private applyGate() {
    const v = useVoice.getState()
    this.gate?.port.postMessage({ type: 'enabled', on: v.sendOnlySpeech && v.vad === 'ready' } satisfies ToGate)
  }

  setSendOnlySpeech(on: boolean) {
    useVoice.setState({ sendOnlySpeech: on })
    this.applyGate()
  }

  // published is the track Alicia hears: the microphone after the gain and
  // the gate.
  private published(): MediaStreamTrack {
    const dest = this.ctx!.createMediaStreamDestination()
    ;(this.gate ?? this.gain!).connect(dest)
    const t = dest.stream.getAudioTracks()[0]
    if (!t) throw new Error('no audio track from the microphone')
    return t
  }

  private async listDevices() {
    try {
      const all = await navigator.mediaDevices.enumerateDevices()
      const devices = all.filter((d) => d.kind === 'audioinput').map((d, i) => ({ id: d.deviceId, label: d.label || `Microphone ${i + 1}` }))
      const current = this.stream?.getAudioTracks()[0]?.getSettings().deviceId
      useVoice.setState({ devices, deviceId: useVoice.getState().deviceId ?? current })
    } catch {
      /* the list stays empty: the default device is used */
    }
  }

  private onTrack(track: RemoteTrack, p: RemoteParticipant) {
    if (p.identity !== AGENT || track.kind !== Track.Kind.Audio || !this.ctx) return
    // The element plays it (Chrome feeds WebAudio a remote track only while
    // a media element plays it); the analyser only listens.
    this.agentEl?.remove()
    const el = track.attach()
    el.setAttribute('aria-hidden', 'true')
    el.dataset.alicia = 'agent-audio'
    document.body.appendChild(el)
    this.agentEl = el
    const an = this.ctx.createAnalyser()
    this.ctx.createMediaStreamSource(new MediaStream([track.mediaStreamTrack])).connect(an)
    this.agent = new Meter(an, AGENT_DB, AGENT_HANGOVER_MS)
  }

  private onData(payload: Uint8Array, p?: RemoteParticipant) {
    if (p?.identity !== AGENT) return
    try {
      const env = decodeEnvelope(payload)
      if (env.type === MessageType.SentencePlayout && env.conversationId === this.conversationId) useApp.getState().receive(env)
      if (env.type === MessageType.Transcription && (env.body as Transcription).addressed === false) emit({ kind: 'not-addressed', at: performance.now() })
    } catch {
      /* not an envelope for the page */
    }
  }

  private tick() {
    const ctx = this.ctx
    if (!ctx || !this.mic) return
    const now = performance.now()
    const u = this.mic.tick(now, ctx.sampleRate)
    if (u) emit({ kind: u.edge === 'start' ? 'user-speech-start' : 'user-speech-end', at: u.at })
    const a = this.agent?.tick(now, ctx.sampleRate)
    if (a) emit({ kind: a.edge === 'start' ? 'agent-audio-start' : 'agent-audio-end', at: a.at })
    const v = useVoice.getState()
    // The VAD's verdict once its model runs; the level before (it loads
    // after the call is up) and where it cannot run.
    const userSpeaking = v.vad === 'ready' ? this.vadSpeaking : this.mic.speaking
    const phase = phaseOf({ connected: this.connected, muted: v.muted, userSpeaking,
      agentSpeaking: this.agent?.speaking ?? false, awaiting: awaitingAnswer() })
    const level = Math.round(this.mic.level * 20) / 20
    if (phase !== v.phase || level !== v.level) useVoice.setState({ phase, level })
  }

  private applyGain() {
    const v = useVoice.getState()
    if (this.gain) this.gain.gain.value = v.muted || (v.pushToTalk && !v.talking) ? 0 : 1
  }

  setMuted(muted: boolean) {
    useVoice.setState({ muted })
    this.applyGain()
  }

  setPushToTalk(on: boolean) {
    useVoice.setState({ pushToTalk: on, talking: false })
    this.applyGain()
  }

  setTalking(talking: boolean) {
    useVoice.setState({ talking })
    this.applyGain()
  }

  async setDevice(id: string) {
    useVoice.setState({ deviceId: id })
    try {
      await this.openMicrophone(id)
    } catch (e) {
      useVoice.setState({ error: classifyError(e, { stage: 'microphone', hostname: location.hostname }).message })
    }
  }

  async startAudio() {
    await this.room?.startAudio()
    useVoice.setState({ needsClick: !(this.room?.canPlaybackAudio ?? true) })
  }

  private fail(p: VoiceProblem) {
    this.release()
    useVoice.setState({ phase: 'error', problem: p, error: p.message, level: 0 })
  }

  // stop leaves the room and releases the microphone.
  stop() {
    this.release()
    useVoice.setState({ ...initialVoice, pushToTalk: useVoice.getState().pushToTalk, sendOnlySpeech: useVoice.getState().sendOnlySpeech })
  }

  private release() {
    this.stopped = true
    this.joined = false
    this.connected = false
    clearInterval(this.timer)
    void this.room?.disconnect()
    this.room = null
    this.stream?.getTracks().forEach((t) => t.stop())
    this.stream = null
    this.agentEl?.remove()
    this.agentEl = null
    this.vad?.terminate()
    this.vad = null
    this.gate = null
    void this.ctx?.close()
    this.ctx = null
  }
}

// awaitingAnswer: the person's last words are transcribed and Alicia has
// not started speaking yet.
function awaitingAnswer(): boolean {
  const chat = useApp.getState().chat
  const last = chat ? chat.byId[chat.order.at(-1) ?? ''] : undefined
  if (!last) return false
  if (last.role === 'user') return last.voice === true
  return last.role === 'assistant' && (last.status === 'streaming' || last.status === 'pending') && !last.spoken?.length && !last.error
}

// The connection test of the settings page's voice check: the microphone
// (opened and closed again, which asks for the permission), a room token,
// LiveKit's signalling and the media (ICE), without speaking to Alicia.
// Tokens belong to a conversation, so it makes one ("Voice check") and
// deletes it afterwards.
export type ConnectionStep = 'microphone' | 'token' | 'signal' | 'media'

export interface ConnectionTest {
  // The steps that worked, in order, with how long each took (ms).
  passed: { step: ConnectionStep; ms: number }[]
  problem?: VoiceProblem
}

export async function testConnection(onStep?: (t: ConnectionTest) => void): Promise<ConnectionTest> {
  const result: ConnectionTest = { passed: [] }
  const pass = (step: ConnectionStep, since: number) => {
    result.passed.push({ step, ms: Math.round(performance.now() - since) })
    onStep?.({ passed: [...result.passed] })
  }
  const insecure = originProblem(currentBrowser())
  if (insecure) return { ...result, problem: insecure }
  const progress = { signal: false }
  let serverUrl: string | undefined
  let conversationId: string | undefined
  const room = new Room({ adaptiveStream: false, dynacast: false, disconnectOnPageLeave: true })
  try {
    let t = performance.now()
    const stream = await staged('microphone', navigator.mediaDevices.getUserMedia({ audio: true }))
    stream.getTracks().forEach((tr) => tr.stop())
    pass('microphone', t)
    t = performance.now()
    conversationId = (await staged('token', api.createConversation('Voice check'))).id
    const token = await staged('token', api.roomToken(conversationId))
    serverUrl = token.url
    pass('token', t)
    t = performance.now()
    room.once(RoomEvent.SignalConnected, () => {
      pass('signal', t)
      t = performance.now()
    })
    await joinRoom(room, token.url, token.token, progress)
    pass('media', t)
  } catch (e) {
    result.problem = toProblem(e, progress.signal, serverUrl) ?? classifyError(e, { stage: 'session' })
  } finally {
    await room.disconnect().catch(() => {})
    if (conversationId) await api.deleteConversation(conversationId).catch(() => {})
  }
  return result
}
