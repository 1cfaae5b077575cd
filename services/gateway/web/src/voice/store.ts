// The voice session's state as the page shows it, and the session's engine
// (./engine.ts, with livekit-client: loaded when the person first presses
// the microphone; it writes the state here). Only the type of the engine is
// imported, so this module loads no LiveKit code.
import { create } from 'zustand'
import type { VoiceEngine } from './engine'
import type { VoiceProblem } from './preflight'

export type VoicePhase = 'off' | 'connecting' | 'listening' | 'user' | 'thinking' | 'agent' | 'muted' | 'error'

export interface VoiceState {
  phase: VoicePhase
  conversationId?: string
  // A message that does not end the session (a device change that failed);
  // with phase 'error', problem's sentence.
  error?: string
  // Why the session could not start or ended (phase 'error'): shown as
  // <p role="alert" data-voice-problem={problem.kind}>.
  problem?: VoiceProblem
  // Microphone level 0..1 after mute and push-to-talk (what Alicia gets).
  level: number
  muted: boolean
  pushToTalk: boolean
  // Push-to-talk: the talk button or key is held.
  talking: boolean
  // Send the microphone only while the in-page VAD hears speech (kept
  // across sessions, as push-to-talk is); gateOpen: it is being sent now.
  sendOnlySpeech: boolean
  gateOpen: boolean
  // The in-page VAD: loading its model, running, or failed (the panel then
  // follows the microphone's level and the gate sends everything).
  vad: 'off' | 'loading' | 'ready' | 'failed'
  devices: { id: string; label: string }[]
  deviceId?: string
  // The browser blocked playback until a click (autoplay policy).
  needsClick: boolean
  // When the engine started (performance.now()) and when it was listening.
  startedAt?: number
  listeningAt?: number
}

export const initialVoice: VoiceState = {
  phase: 'off', level: 0, muted: false, pushToTalk: false, talking: false, sendOnlySpeech: false, gateOpen: false, vad: 'off',
  devices: [], needsClick: false,
}

export interface VoiceStore extends VoiceState {
  // The running session's engine; null when none runs.
  engine: VoiceEngine | null
  // start loads the engine and starts a session in the conversation,
  // ending the one that ran.
  start(conversationId: string): Promise<void>
  stop(): void
  // showProblem says why voice cannot start (the panel's problem).
  showProblem(problem: VoiceProblem, conversationId?: string): void
}

export const useVoice = create<VoiceStore>()((set, get) => ({
  ...initialVoice,
  engine: null,
  async start(conversationId) {
    get().engine?.stop()
    const { VoiceEngine } = await import('./engine')
    const e = new VoiceEngine(conversationId)
    set({ engine: e })
    await e.start(get().deviceId)
  },
  stop() {
    get().engine?.stop()
    set({ engine: null })
  },
  showProblem(problem, conversationId) {
    set({ ...initialVoice, pushToTalk: get().pushToTalk, sendOnlySpeech: get().sendOnlySpeech, phase: 'error', problem, error: problem.message, conversationId })
  },
}))

// phaseOf derives what the page says from what the engine hears: the
// person's voice wins (a barge-in stops Alicia), then Alicia's, then a
// transcript waiting for its answer.
export function phaseOf(o: { connected: boolean; muted: boolean; userSpeaking: boolean; agentSpeaking: boolean; awaiting: boolean }): VoicePhase {
  if (!o.connected) return 'connecting'
  if (o.userSpeaking && !o.muted) return 'user'
  if (o.agentSpeaking) return 'agent'
  if (o.awaiting) return 'thinking'
  return o.muted ? 'muted' : 'listening'
}

export const phaseLabel: Record<VoicePhase, string> = {
  off: 'Voice off',
  connecting: 'Connecting…',
  listening: 'Listening',
  user: 'You are speaking',
  thinking: 'Thinking…',
  agent: 'Alicia is speaking',
  muted: 'Microphone muted',
  error: 'Voice failed',
}
