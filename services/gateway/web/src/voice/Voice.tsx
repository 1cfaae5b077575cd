// Talking to Alicia: the microphone button in the composer and, while a
// voice session runs, its panel (state, level, mute, push-to-talk, device,
// end). The engine and livekit-client load on the first press.
//
// What prevents voice is said by the button, never thrown: the page's origin
// is checked before anything is made or fetched (./voice/preflight.ts), and
// the engine turns its failures into the same sentences.
import { useEffect } from 'react'
import { useApp } from '../store/app'
import { useBackendNotices } from './hooks'
import { classifyError, currentBrowser, originProblem } from './preflight'
import { phaseLabel, useVoice } from './store'
import { VoiceProblemText } from './VoiceProblem'
import { HandsFree } from './HandsFree'
import { VoicePreferences } from './VoicePreferences'

function IconMic() {
  return (
    <svg viewBox="0 0 24 24" width="18" height="18" fill="none" stroke="currentColor" strokeWidth="2" strokeLinecap="round" strokeLinejoin="round" aria-hidden="true">
      <path d="M12 3a3 3 0 0 0-3 3v6a3 3 0 0 0 6 0V6a3 3 0 0 0-3-3zM5 11a7 7 0 0 0 14 0M12 18v3" />
    </svg>
  )
}

// MicButton starts or ends the voice session of the conversation. Without
// an open conversation it makes one first.
export function MicButton() {
  const phase = useVoice((s) => s.phase)
  // A boolean, not the chat: the button must not render on every change of
  // the chat (the key press that sends a message is on the critical path).
  const loading = useApp((s) => s.chat !== null && s.chatLoad !== 'ready')
  const on = phase !== 'off' && phase !== 'error'

  async function toggle() {
    const voice = useVoice.getState()
    if (on) {
      voice.stop()
      return
    }
    // Nothing is made (no conversation) for a page that cannot use the microphone.
    const insecure = originProblem(currentBrowser())
    if (insecure) {
      voice.showProblem(insecure)
      return
    }
    try {
      let cid = useApp.getState().chat?.conversationId
      if (!cid) cid = await useApp.getState().newConversation('Voice conversation')
      if (cid) await voice.start(cid)
    } catch (e) {
      // The engine's code could not be loaded, the conversation not made.
      voice.showProblem(classifyError(e, { stage: 'session' }))
    }
  }
  return (
    <button
      type="button"
      onClick={() => void toggle()}
      aria-pressed={on}
      aria-label={on ? 'End voice' : 'Talk to Alicia'}
      title={on ? 'End voice' : 'Talk to Alicia'}
      disabled={!on && loading}
      className={`focus-ring flex h-11 items-center gap-1 rounded-xl px-3 ${on ? 'bg-red-600 text-white' : 'border border-slate-300 text-slate-700 dark:border-slate-700 dark:text-slate-200'}`}
    >
      <IconMic /> <span className="hidden sm:inline">{on ? 'End' : 'Voice'}</span>
    </button>
  )
}

// VoicePanel shows the session while it runs.
export function VoicePanel() {
  const v = useVoice()
  const engine = v.engine
  const partial = useApp((s) => s.chat?.partial)
  const chatId = useApp((s) => s.chat?.conversationId)
  const notices = useBackendNotices(v.phase !== 'off' && v.phase !== 'error')

  // The session belongs to its conversation: leaving it ends the session.
  useEffect(() => {
    if (v.phase !== 'off' && v.conversationId && chatId !== v.conversationId) useVoice.getState().stop()
  }, [chatId, v.phase, v.conversationId])

  // Push-to-talk: hold Space (outside text fields) or the Talk button.
  useEffect(() => {
    if (!v.pushToTalk || v.phase === 'off') return
    const typing = (t: EventTarget | null) => t instanceof HTMLElement && (t.isContentEditable || ['TEXTAREA', 'INPUT', 'SELECT'].includes(t.tagName))
    const down = (e: KeyboardEvent) => {
      if (e.code === 'Space' && !e.repeat && !typing(e.target)) {
        e.preventDefault()
        engine?.setTalking(true)
      }
    }
    const up = (e: KeyboardEvent) => {
      if (e.code === 'Space' && !typing(e.target)) engine?.setTalking(false)
    }
    window.addEventListener('keydown', down)
    window.addEventListener('keyup', up)
    return () => {
      window.removeEventListener('keydown', down)
      window.removeEventListener('keyup', up)
    }
  }, [v.pushToTalk, v.phase, engine])

  if (v.phase === 'off') return null
  if (v.phase === 'error')
    return (
      <div data-testid="voice-problem" className="mx-auto mb-2 flex max-w-3xl items-start justify-between gap-2 rounded-lg border border-red-300 bg-red-50 p-2 text-sm dark:border-red-800 dark:bg-red-950">
        <VoiceProblemText problem={v.problem ?? { kind: 'other', message: `Voice failed: ${v.error ?? 'an unknown error'}` }} />
        <button type="button" onClick={() => useVoice.setState({ phase: 'off', error: undefined, problem: undefined })}
          className="focus-ring shrink-0 rounded px-2 text-red-900 dark:text-red-100">Dismiss</button>
      </div>
    )
  const listening = v.phase !== 'connecting'
  return (
    <section aria-label="Voice" className="mx-auto mb-2 w-full max-w-3xl rounded-xl border border-slate-200 bg-slate-50 p-2 text-sm dark:border-slate-800 dark:bg-slate-900">
      <div className="flex flex-wrap items-center gap-2">
        <span role="status" aria-live="polite" data-testid="voice-state" data-phase={v.phase}
          className={`min-w-36 rounded-full px-2 py-0.5 text-center font-medium ${v.phase === 'user' ? 'bg-indigo-600 text-white' : v.phase === 'agent' ? 'bg-emerald-700 text-white' : 'bg-slate-200 text-slate-800 dark:bg-slate-800 dark:text-slate-100'}`}>
          {phaseLabel[v.phase]}
        </span>
        <meter aria-label="Microphone level" min={0} max={1} value={v.level} data-testid="mic-level" className="h-2 w-24" />
        <button type="button" aria-pressed={v.muted} onClick={() => engine?.setMuted(!v.muted)} disabled={!listening}
          className="focus-ring rounded border border-slate-300 px-2 py-0.5 dark:border-slate-700">{v.muted ? 'Unmute' : 'Mute'}</button>
        <label className="flex items-center gap-1">
          <input type="checkbox" checked={v.pushToTalk} onChange={(e) => engine?.setPushToTalk(e.target.checked)} disabled={!listening} />
          Push to talk
        </label>
        <label className="flex items-center gap-1" title="The microphone is sent only while speech detection in this page hears you (with the half second before)">
          <input type="checkbox" checked={v.sendOnlySpeech} onChange={(e) => engine?.setSendOnlySpeech(e.target.checked)} disabled={!listening} />
          Send only while I speak
        </label>
        {v.sendOnlySpeech && v.vad === 'ready' && (
          <span data-testid="mic-gate" data-open={v.gateOpen} className={`rounded px-1.5 py-0.5 text-xs ${v.gateOpen ? 'bg-indigo-100 text-indigo-900 dark:bg-indigo-950 dark:text-indigo-100' : 'text-slate-600 dark:text-slate-300'}`}>
            {v.gateOpen ? 'Sending' : 'Not sending'}
          </span>
        )}
        {v.pushToTalk && (
          <button type="button" aria-pressed={v.talking} disabled={!listening}
            onPointerDown={(e) => { e.currentTarget.setPointerCapture(e.pointerId); engine?.setTalking(true) }}
            onPointerUp={() => engine?.setTalking(false)} onPointerCancel={() => engine?.setTalking(false)}
            onKeyDown={(e) => { if ((e.key === 'Enter' || e.key === ' ') && !e.repeat) { e.preventDefault(); engine?.setTalking(true) } }}
            onKeyUp={(e) => { if (e.key === 'Enter' || e.key === ' ') engine?.setTalking(false) }}
            className={`focus-ring rounded px-3 py-0.5 ${v.talking ? 'bg-indigo-600 text-white' : 'border border-indigo-600 text-indigo-700 dark:text-indigo-300'}`}>
            Hold to talk
          </button>
        )}
        {v.devices.length > 1 && (
          <label className="flex items-center gap-1">
            <span className="sr-only sm:not-sr-only">Microphone</span>
            <select aria-label="Microphone" value={v.deviceId ?? ''} onChange={(e) => void engine?.setDevice(e.target.value)}
              className="focus-ring max-w-40 rounded border border-slate-300 bg-white px-1 py-0.5 dark:border-slate-700 dark:bg-slate-950">
              {v.devices.map((d) => <option key={d.id} value={d.id}>{d.label}</option>)}
            </select>
          </label>
        )}
        {v.needsClick && (
          <button type="button" onClick={() => void engine?.startAudio()} className="focus-ring rounded bg-amber-600 px-2 py-0.5 text-white">
            Play Alicia's voice
          </button>
        )}
      </div>
      <HandsFree conversationId={v.conversationId} disabled={!listening} />
      <VoicePreferences conversationId={v.conversationId} disabled={!listening} />
      {notices.map((n) => (
        <p key={n.key} role="status" data-voice-backend={n.key} className="mt-1 text-amber-800 dark:text-amber-300">{n.message}</p>
      ))}
      {v.vad === 'failed' && (
        <p role="status" data-testid="vad-failed" className="mt-1 text-amber-800 dark:text-amber-300">
          Speech detection could not start in this browser: the state follows the microphone's level{v.sendOnlySpeech ? ' and the microphone is sent all the time' : ''}.
        </p>
      )}
      {v.error && <p role="alert" className="mt-1 text-red-700 dark:text-red-400">{v.error}</p>}
      {partial && <p data-testid="partial-transcript" className="mt-1 text-slate-600 italic dark:text-slate-300" aria-live="polite">{partial}…</p>}
    </section>
  )
}
