// What prevents voice, in one sentence that says what is wrong and how to
// fix it. Pure: it reads the browser through BrowserLike (the page passes
// window, the tests stand-ins) and errors by their names, so it imports
// neither livekit-client nor React and loads with the page (the voice
// button checks before anything else is fetched or made).
//
// Kinds (the page shows them as <p role="alert" data-voice-problem="kind">):
//   insecure-origin     the page is not a secure context, or the browser gives it no navigator.mediaDevices
//   no-microphone       getUserMedia: NotFoundError / OverconstrainedError; no audioinput device listed
//   permission-denied   getUserMedia: NotAllowedError / SecurityError; permissions.query says 'denied'
//   microphone-busy     getUserMedia: NotReadableError / AbortError (another application, the OS)
//   server-unreachable  LiveKit's signalling did not connect (its WebSocket)
//   media-blocked       signalling connected but the media (ICE) did not, or not in time
//   other               anything else: the error's own message

export type VoiceProblemKind =
  | 'insecure-origin'
  | 'no-microphone'
  | 'permission-denied'
  | 'microphone-busy'
  | 'server-unreachable'
  | 'media-blocked'
  | 'other'

export interface VoiceProblem {
  kind: VoiceProblemKind
  // One sentence: what is wrong and the fix.
  message: string
  // What the browser or the library said, when it adds something.
  detail?: string
}

// The parts of window the checks read.
export interface BrowserLike {
  isSecureContext?: boolean
  location: { protocol: string; hostname: string }
  navigator: {
    mediaDevices?: {
      getUserMedia?: (c: MediaStreamConstraints) => Promise<MediaStream>
      enumerateDevices?: () => Promise<readonly { kind: string }[]>
    }
    permissions?: { query(d: { name: string }): Promise<{ state: string }> }
  }
}

// currentBrowser is the page's window as BrowserLike.
export function currentBrowser(): BrowserLike {
  return {
    isSecureContext: window.isSecureContext,
    location: window.location,
    navigator: window.navigator as unknown as BrowserLike['navigator'],
  }
}

// The HTTPS address `alicia up` serves the page at by default: the same host, port 8443.
export const HTTPS_PORT = 8443
// The gateway's page with its certificate authority and how to trust it.
export const CA_PATH = '/ca'
// livekit-server's ports (alicia up, deploy/): ICE over UDP and TCP, signalling.
export const RTC_UDP_PORT = 7882
export const RTC_TCP_PORT = 7881
export const SIGNAL_PORT = 7880

export function httpsAddress(loc: { hostname: string }): string {
  return `https://${loc.hostname}:${HTTPS_PORT}`
}

// sentence gives each kind's sentence. hostname: the page's (insecure-origin);
// serverUrl: the LiveKit URL the gateway handed out (server-unreachable).
export function problem(kind: VoiceProblemKind, o: { hostname?: string; serverUrl?: string; pageProtocol?: string; detail?: string } = {}): VoiceProblem {
  const detail = o.detail?.trim() || undefined
  switch (kind) {
    case 'insecure-origin':
      return {
        kind,
        message:
          'Voice needs a secure page: this browser lets only https:// pages (or http://localhost) use the microphone, so open the HTTPS address `alicia up` printed ' +
          `(usually ${httpsAddress({ hostname: o.hostname || '<this host>' })}) and trust its certificate (see ${CA_PATH}).`,
        detail,
      }
    case 'no-microphone':
      return {
        kind,
        message: 'No microphone was found: connect one (or pick another in the Microphone list), check that the system has not turned it off, and press Voice again.',
        detail,
      }
    case 'permission-denied':
      return {
        kind,
        message:
          "The browser blocks the microphone for this site: allow it in the site's settings (the icon left of the address, then Microphone → Allow) and press Voice again.",
        detail,
      }
    case 'microphone-busy':
      return {
        kind,
        message:
          "The microphone could not be started: close other applications that use it (or allow this browser in the system's privacy settings) and press Voice again.",
        detail,
      }
    case 'server-unreachable': {
      const url = o.serverUrl
      if (url && o.pageProtocol === 'https:' && /^(ws|http):/i.test(url))
        return {
          kind,
          message: `This https:// page may not open the voice server's plain address ${url}: the gateway must hand out a wss:// address (ALICIA_LIVEKIT_PUBLIC_URL), then press Voice again.`,
          detail,
        }
      return {
        kind,
        message: `The voice server${url ? ` (LiveKit at ${url})` : ''} could not be reached: check that livekit-server runs and that its port (${SIGNAL_PORT} by default) is open to this device, then press Voice again.`,
        detail,
      }
    }
    case 'media-blocked':
      return {
        kind,
        message:
          `Audio could not reach the server: UDP port ${RTC_UDP_PORT} (or TCP ${RTC_TCP_PORT}) of the server is blocked, or LiveKit advertises an address this device cannot reach ` +
          '(ALICIA_LIVEKIT_NODE_IP), so open those ports in its firewall or set that address, then press Voice again.',
        detail,
      }
    case 'other':
      return { kind, message: `Voice failed: ${detail ?? 'an unknown error'}.`.replace(/([.!?])\.$/, '$1') }
  }
}

// originProblem: whether this page may use the microphone at all. Browsers
// leave navigator.mediaDevices out of insecure contexts.
export function originProblem(b: BrowserLike): VoiceProblem | undefined {
  const md = b.navigator.mediaDevices
  if (b.isSecureContext === false || !md || typeof md.getUserMedia !== 'function')
    return problem('insecure-origin', { hostname: b.location.hostname })
  return undefined
}

export type MicPermission = 'granted' | 'denied' | 'prompt' | 'unknown'

// microphonePermission asks the Permissions API without prompting. Browsers
// that do not know 'microphone' there (older Firefox) reject: 'unknown'.
export async function microphonePermission(b: BrowserLike): Promise<MicPermission> {
  try {
    const s = await b.navigator.permissions?.query({ name: 'microphone' })
    const state = s?.state
    return state === 'granted' || state === 'denied' || state === 'prompt' ? state : 'unknown'
  } catch {
    return 'unknown'
  }
}

// countMicrophones: the audio inputs the browser lists (before permission
// without labels, but listed), undefined when it cannot list them.
export async function countMicrophones(b: BrowserLike): Promise<number | undefined> {
  const md = b.navigator.mediaDevices
  if (!md || typeof md.enumerateDevices !== 'function') return undefined
  try {
    return (await md.enumerateDevices()).filter((d) => d.kind === 'audioinput').length
  } catch {
    return undefined
  }
}

// VoiceCheck is what can be known without asking anything of the person
// (no prompt) or the server.
export interface VoiceCheck {
  secure: boolean
  microphones?: number
  permission: MicPermission
  // In order: the first one is what to fix first.
  problems: VoiceProblem[]
}

export async function checkVoice(b: BrowserLike): Promise<VoiceCheck> {
  const insecure = originProblem(b)
  if (insecure) return { secure: false, permission: 'unknown', problems: [insecure] }
  const [microphones, permission] = await Promise.all([countMicrophones(b), microphonePermission(b)])
  const problems: VoiceProblem[] = []
  if (microphones === 0) problems.push(problem('no-microphone'))
  if (permission === 'denied') problems.push(problem('permission-denied'))
  return { secure: true, microphones, permission, problems }
}

// Where a voice session (or the connection test) was when it failed.
export type VoiceStage = 'microphone' | 'token' | 'signal' | 'media' | 'publish' | 'session'

export interface FailureContext {
  stage: VoiceStage
  // LiveKit's signalling had connected (RoomEvent.SignalConnected).
  signalConnected?: boolean
  // The LiveKit URL the gateway handed out.
  serverUrl?: string
  // The page's location.protocol.
  pageProtocol?: string
  hostname?: string
}

// A voice connection that did not come up in time (the engine's own guard
// over livekit-client's timeouts).
export class VoiceTimeoutError extends Error {
  override readonly name = 'VoiceTimeoutError'
}

function errName(e: unknown): string {
  return typeof e === 'object' && e !== null && typeof (e as { name?: unknown }).name === 'string' ? (e as { name: string }).name : ''
}

function errMessage(e: unknown): string {
  if (e instanceof Error || (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string'))
    return (e as { message: string }).message
  return String(e)
}

// livekit-client's ConnectionError carries its reason's name (reasonName:
// 'Cancelled', 'NotAllowed', 'ServerUnreachable', 'InternalError',
// 'Timeout', 'WebSocket', 'LeaveRequest', 'ServiceNotFound').
function connectionReason(e: unknown): string | undefined {
  if (errName(e) !== 'ConnectionError') return undefined
  const r = (e as { reasonName?: unknown }).reasonName
  return typeof r === 'string' ? r : ''
}

// isCancelled: the session was ended on purpose (End, leaving the page), not a problem.
export function isCancelled(e: unknown): boolean {
  return connectionReason(e) === 'Cancelled'
}

// classifyError turns what start() or the connection test caught into the
// problem to show. It never throws.
export function classifyError(e: unknown, ctx: FailureContext): VoiceProblem {
  const name = errName(e)
  const detail = errMessage(e)
  // getUserMedia's errors (and the names older browsers gave them).
  switch (name) {
    case 'NotAllowedError':
    case 'PermissionDeniedError':
    case 'SecurityError':
      return problem('permission-denied', { detail })
    case 'NotFoundError':
    case 'DevicesNotFoundError':
    case 'OverconstrainedError':
    case 'ConstraintNotSatisfiedError':
      return problem('no-microphone', { detail })
    case 'NotReadableError':
    case 'TrackStartError':
      return problem('microphone-busy', { detail })
    case 'AbortError':
      if (ctx.stage === 'microphone') return problem('microphone-busy', { detail })
      break
  }
  // No navigator.mediaDevices (a TypeError reading getUserMedia of undefined).
  if (ctx.stage === 'microphone' && name === 'TypeError' && /mediaDevices|getUserMedia/.test(detail))
    return problem('insecure-origin', { hostname: ctx.hostname, detail })
  const reason = connectionReason(e)
  const connecting = ctx.stage === 'signal' || ctx.stage === 'media' || ctx.stage === 'publish'
  if (reason !== undefined || name === 'VoiceTimeoutError' || (connecting && ctx.signalConnected)) {
    if (reason === 'NotAllowed') return problem('other', { detail: `the voice server refused the room token (${detail})` })
    // Signalling is up, the media are not: ICE failed or timed out, or the
    // publication found no transport.
    if (ctx.signalConnected) return problem('media-blocked', { detail })
    if (connecting || reason !== undefined) return problem('server-unreachable', { serverUrl: ctx.serverUrl, pageProtocol: ctx.pageProtocol, detail })
  }
  return problem('other', { detail })
}

// disconnectProblem: the room went away after the session had started.
// reason is livekit-client's DisconnectReason by name (CLIENT_INITIATED,
// MEDIA_FAILURE, …); undefined when it gave none. Nothing for an end the
// page asked for.
export function disconnectProblem(reason: string | undefined): VoiceProblem | undefined {
  switch (reason) {
    case 'CLIENT_INITIATED':
      return undefined
    case 'MEDIA_FAILURE':
      return problem('media-blocked', { detail: 'the media connection failed' })
    // Revoked: the session ended or the conversation was deleted; pressing
    // Voice again asks for a new token, which only a valid session gets.
    case 'PARTICIPANT_REMOVED':
      return { kind: 'other', message: 'Voice ended: the session was signed out or ended. Sign in again to talk.' }
    case 'ROOM_DELETED':
      return { kind: 'other', message: 'Voice ended: this conversation was deleted.' }
    default: {
      const why = reason && reason !== 'UNKNOWN_REASON' ? ` (${reason.toLowerCase().replaceAll('_', ' ')})` : ''
      return { kind: 'other', message: `The voice connection was lost${why}: press Voice to connect again.` }
    }
  }
}

// The speech backends a voice session needs, from server-info (REST or the
// WebSocket's ServerInfo): which of them do not answer.
export interface BackendStatus {
  reachable: boolean
}

export function backendNotices(models: { asr?: BackendStatus; tts?: BackendStatus } | undefined): { key: 'asr' | 'tts'; message: string }[] {
  if (!models) return []
  const out: { key: 'asr' | 'tts'; message: string }[] = []
  if (models.asr && !models.asr.reachable)
    out.push({ key: 'asr', message: 'Speech recognition is not answering yet (still loading, or not running): what you say is not transcribed until it does.' })
  if (models.tts && !models.tts.reachable)
    out.push({ key: 'tts', message: 'Speech synthesis is not answering yet (still loading, or not running): answers are written but not spoken until it does.' })
  return out
}
