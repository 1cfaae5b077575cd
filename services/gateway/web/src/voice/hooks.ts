// The voice feature's reads: whether the speech backends answer while a
// session runs (on the one hook pattern of src/ui/hooks.ts), and the voice
// check of the settings.
import { useCallback, useEffect, useState } from 'react'
import { api } from '../api'
import { useApp } from '../store/app'
import { useResource } from '../ui/hooks'
import type { ConnectionTest } from './engine'
import { backendNotices, checkVoice, classifyError, currentBrowser, type BackendStatus, type VoiceCheck } from './preflight'

// While a speech backend does not answer, server-info is read again this
// often.
export const BACKEND_POLL_MS = 5000

type Backends = { asr: BackendStatus; tts: BackendStatus }

// backendsDue: whether server-info is to be read again (the last read
// failed, or a backend did not answer).
export function backendsDue(read: Backends | undefined, failed: boolean): boolean {
  return failed || !read || backendNotices(read).length > 0
}

// useBackendNotices: while a session runs, which speech backends do not
// answer (server-info's reachable). The WebSocket's ServerInfo is from when
// it opened, so the REST server-info is read when the session starts and
// every 5 s while one of them does not answer.
export function useBackendNotices(active: boolean): ReturnType<typeof backendNotices> {
  const fromSocket = useApp((s) => s.serverInfo?.models)
  const r = useResource<Backends>(active ? 'session' : null, () => api.serverInfo().then((i) => i.models))
  const { data, loading, error, reload, update } = r
  const due = backendsDue(data, error !== undefined)
  useEffect(() => {
    // A session that ended forgets what it read: the next starts afresh.
    if (!active) {
      if (data) update(() => undefined)
      return
    }
    if (loading || !due) return
    const t = setTimeout(() => void reload(), BACKEND_POLL_MS)
    return () => clearTimeout(t)
  }, [active, data, loading, due, reload, update])
  return active ? backendNotices(data ?? fromSocket) : []
}

// useVoiceCheck: what ./preflight.ts can tell without asking (a secure page,
// the microphones, the permission), checked again when a device comes or
// goes or the permission changes; and testConnection, the engine's
// connection test (microphone, token, signalling, media), step by step.
export function useVoiceCheck() {
  const [check, setCheck] = useState<VoiceCheck>()
  const [test, setTest] = useState<ConnectionTest & { running: boolean }>()

  const run = useCallback(() => {
    void checkVoice(currentBrowser()).then(setCheck)
  }, [])
  useEffect(() => {
    run()
    // Again when a device comes or goes, or the permission changes.
    const md = typeof navigator !== 'undefined' ? navigator.mediaDevices : undefined
    md?.addEventListener?.('devicechange', run)
    let status: PermissionStatus | undefined
    let gone = false
    try {
      navigator.permissions
        ?.query({ name: 'microphone' as PermissionName })
        .then((s) => {
          if (gone) return
          status = s
          s.addEventListener('change', run)
        })
        .catch(() => {})
    } catch {
      /* no Permissions API for the microphone here */
    }
    return () => {
      gone = true
      md?.removeEventListener?.('devicechange', run)
      status?.removeEventListener('change', run)
    }
  }, [run])

  async function testConnection() {
    setTest({ passed: [], running: true })
    try {
      const { testConnection: t } = await import('./engine')
      const r = await t((p) => setTest({ ...p, running: true }))
      setTest({ ...r, running: false })
    } catch (e) {
      setTest({ passed: [], problem: classifyError(e, { stage: 'session' }), running: false })
    }
    run()
  }

  return { check, test, testConnection }
}
