// The settings page's voice check: what ./voice/preflight.ts can tell
// without asking (a secure page, microphones, the permission, the speech
// backends) and, on a button, the connection test of ./voice/engine.ts
// (microphone, token, signalling, media), each problem in the sentence the
// voice button would show.
import type { ConnectionStep } from './engine'
import { useVoiceCheck } from './hooks'
import { backendNotices, RTC_TCP_PORT, RTC_UDP_PORT, type BackendStatus, type MicPermission } from './preflight'
import { VoiceProblemText } from './VoiceProblem'

function Mark({ ok }: { ok: boolean | undefined }) {
  if (ok === undefined) return <span aria-hidden="true" className="w-4 shrink-0 text-center text-slate-500">–</span>
  return ok ? (
    <span aria-hidden="true" className="w-4 shrink-0 text-center font-bold text-emerald-700 dark:text-emerald-400">✓</span>
  ) : (
    <span aria-hidden="true" className="w-4 shrink-0 text-center font-bold text-red-700 dark:text-red-400">✗</span>
  )
}

const PERMISSION: Record<MicPermission, string> = {
  granted: 'allowed',
  prompt: 'asked when Voice is first pressed',
  denied: 'blocked for this site',
  unknown: 'this browser does not say',
}

const STEPS: { step: ConnectionStep; label: string }[] = [
  { step: 'microphone', label: 'Microphone opened' },
  { step: 'token', label: 'Room token from the gateway' },
  { step: 'signal', label: 'Voice server reached (signalling)' },
  { step: 'media', label: `Audio connection (UDP ${RTC_UDP_PORT} or TCP ${RTC_TCP_PORT})` },
]

export function VoiceCheck({ models }: { models?: { asr: BackendStatus; tts: BackendStatus } }) {
  const { check, test, testConnection } = useVoiceCheck()

  const notices = backendNotices(models)
  const shown = check?.problems ?? []
  const testProblem = test?.problem && !shown.some((p) => p.kind === test.problem?.kind) ? test.problem : undefined
  const failedAt = test && !test.running && test.problem ? STEPS.find((s) => !test.passed.some((p) => p.step === s.step))?.step : undefined

  return (
    <div>
      <h2 className="mb-2 font-medium">Voice check</h2>
      {check ? (
        <ul className="space-y-1 text-sm" aria-label="Voice check">
          <li className="flex items-start gap-2" data-testid="voice-check-origin">
            <Mark ok={check.secure} />
            <span>Secure page: {check.secure ? 'yes (https:// or localhost)' : 'no (plain http:// from another host)'}</span>
          </li>
          <li className="flex items-start gap-2" data-testid="voice-check-microphone">
            <Mark ok={check.microphones === undefined ? undefined : check.microphones > 0} />
            <span>Microphone: {check.microphones === undefined ? 'cannot be listed on this page' : check.microphones === 0 ? 'none found' : `${check.microphones} found`}</span>
          </li>
          <li className="flex items-start gap-2" data-testid="voice-check-permission">
            <Mark ok={check.permission === 'granted' ? true : check.permission === 'denied' ? false : undefined} />
            <span>Permission: {check.secure ? PERMISSION[check.permission] : 'not available on this page'}</span>
          </li>
          {models && (
            <li className="flex items-start gap-2" data-testid="voice-check-backends">
              <Mark ok={notices.length === 0} />
              <span>{notices.length === 0 ? 'Speech recognition and speech synthesis answer' : notices.map((n) => <span key={n.key} className="block">{n.message}</span>)}</span>
            </li>
          )}
        </ul>
      ) : (
        <p className="text-sm text-slate-500">Checking…</p>
      )}
      {shown.map((p) => (
        <VoiceProblemText key={p.kind} problem={p} className="mt-2 text-sm" />
      ))}
      <div className="mt-2 flex flex-wrap items-center gap-2 text-sm">
        <button type="button" onClick={() => void testConnection()} disabled={test?.running}
          className="focus-ring rounded border border-slate-300 px-3 py-1 hover:bg-slate-100 disabled:opacity-50 dark:border-slate-700 dark:hover:bg-slate-800">
          {test?.running ? 'Testing…' : 'Test the connection'}
        </button>
        <span className="text-xs text-slate-600 dark:text-slate-400">Opens the microphone and joins a voice room for a moment (a conversation made and deleted for it).</span>
      </div>
      {test && (
        <ul className="mt-2 space-y-1 text-sm" aria-label="Connection test" aria-live="polite">
          {STEPS.map(({ step, label }) => {
            const passed = test.passed.find((p) => p.step === step)
            return (
              <li key={step} className="flex items-center gap-2" data-testid={`voice-test-${step}`} data-result={passed ? 'ok' : failedAt === step ? 'failed' : 'not-run'}>
                <Mark ok={passed ? true : failedAt === step ? false : undefined} /> {label}
                {passed && <span className="text-xs text-slate-600 dark:text-slate-400">{passed.ms} ms</span>}
              </li>
            )
          })}
        </ul>
      )}
      {testProblem && <VoiceProblemText problem={testProblem} className="mt-2 text-sm" />}
    </div>
  )
}
