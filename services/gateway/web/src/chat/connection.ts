// One conversation's WebSocket (/v1/ws): Configuration first, resume after
// the last server stanza seen, reconnect with backoff, and resend what the
// server has not confirmed (JetStream drops a stanza id it already has, so
// a resend never doubles a message).
import { decodeEnvelope, encodeEnvelope, MessageType } from '../protocol'
import type { Configuration, Envelope, ServerInfo, StartAnswer, UserMessage } from '../protocol'

export type ConnectionStatus = 'connecting' | 'open' | 'reconnecting' | 'offline' | 'closed'

export interface ConnectionEvents {
  status(s: ConnectionStatus, detail?: string): void
  envelope(env: Envelope): void
  serverInfo?(info: ServerInfo): void
  // The conversation the server bound the connection to (a new one's id).
  bound?(conversationId: string): void
  // The server closed the connection for good (revoked): 4401 the session
  // ended (signed out, elsewhere too), 4404 the conversation was deleted.
  revoked?(code: number, reason: string): void
}

// Close codes after which reconnecting cannot help: a policy violation,
// the session ended, refused, the conversation deleted.
const FINAL_CLOSES = new Set([1008, 4401, 4403, 4404])

export interface ConnectionOptions {
  conversationId?: string
  // The highest server stream sequence already applied: the server resends what follows.
  lastSeq: () => number
  // Client stanza ids continue after this one (the conversation's lastClientStanzaId).
  stanzaBase: number
  url?: string
  clientVersion?: string
  features?: Configuration['features']
  // Backoff bounds in ms.
  minDelay?: number
  maxDelay?: number
  socketFactory?: (url: string) => WebSocket
}

interface Pending {
  env: Envelope
  sentAt: number
}

export const CLIENT_VERSION = 'web/0.1.0'
const DEFAULT_FEATURES: Configuration['features'] = ['streaming', 'partial_responses', 'reasoning_steps', 'tool_use', 'acknowledgements']

export class Connection {
  private ws?: WebSocket
  private stanza: number
  private attempts = 0
  private timer?: ReturnType<typeof setTimeout>
  private closed = false
  // closing: closeWhenSent waits for the outbox to go out.
  private closing = false
  private closeTimer?: ReturnType<typeof setTimeout>
  private configured = false
  private conversationId?: string
  // Sent envelopes the server has not confirmed yet (user messages until
  // their answer starts), resent after a reconnect.
  private unconfirmed: Pending[] = []
  // Envelopes waiting for the connection.
  private outbox: Envelope[] = []

  constructor(
    private readonly opts: ConnectionOptions,
    private readonly ev: ConnectionEvents,
  ) {
    this.stanza = opts.stanzaBase
    this.conversationId = opts.conversationId
  }

  start(): void {
    this.closed = false
    this.open(false)
  }

  // closeWhenSent closes once nothing waits for the connection: a message
  // sent just before the page moved to another conversation still goes
  // out (within maxWaitMs; until then the connection keeps reconnecting).
  closeWhenSent(maxWaitMs = 10_000): void {
    if (this.outbox.length === 0) {
      this.close()
      return
    }
    this.closing = true
    this.ev.status('closed')
    this.closeTimer = setTimeout(() => this.close(), maxWaitMs)
  }

  close(): void {
    this.closed = true
    this.closing = false
    clearTimeout(this.closeTimer)
    clearTimeout(this.timer)
    const ws = this.ws
    this.ws = undefined
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, 'bye')
    this.ev.status('closed')
  }

  // reconnectNow drops the socket and reconnects at once (e.g. back online).
  reconnectNow(): void {
    if (this.closed) return
    clearTimeout(this.timer)
    this.attempts = 0
    const ws = this.ws
    this.ws = undefined
    if (ws) {
      ws.onclose = null
      ws.close(4000, 'reconnect')
    }
    this.open(true)
  }

  get isOpen(): boolean {
    return this.configured && this.ws?.readyState === WebSocket.OPEN
  }

  // send stamps the envelope with the next client stanza id and sends it now
  // or once the connection is up.
  send(type: number, body: object, meta?: Record<string, unknown>): Envelope {
    this.stanza += 1
    const env: Envelope = { stanzaId: this.stanza, conversationId: this.conversationId, type, body, meta }
    if (type === MessageType.UserMessage) this.unconfirmed.push({ env, sentAt: Date.now() })
    if (this.isOpen) this.write(env)
    else this.outbox.push(env)
    return env
  }

  private url(): string {
    if (this.opts.url) return this.opts.url
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:'
    return `${proto}//${location.host}/v1/ws`
  }

  private open(reconnecting: boolean): void {
    this.configured = false
    this.ev.status(reconnecting ? 'reconnecting' : 'connecting')
    let ws: WebSocket
    try {
      ws = this.opts.socketFactory ? this.opts.socketFactory(this.url()) : new WebSocket(this.url())
    } catch (e) {
      this.scheduleReconnect(String(e))
      return
    }
    ws.binaryType = 'arraybuffer'
    this.ws = ws
    ws.onopen = () => {
      const last = this.opts.lastSeq()
      const cfg: Configuration = {
        conversationId: this.conversationId,
        lastSequenceSeen: last > 0 ? -last : undefined,
        clientVersion: this.opts.clientVersion ?? CLIENT_VERSION,
        device: 'web',
        features: this.opts.features ?? DEFAULT_FEATURES,
      }
      this.stanza += 1
      this.write({ stanzaId: this.stanza, conversationId: this.conversationId, type: MessageType.Configuration, body: cfg })
    }
    ws.onmessage = (e: MessageEvent) => {
      if (!(e.data instanceof ArrayBuffer)) return
      let env: Envelope
      try {
        env = decodeEnvelope(new Uint8Array(e.data))
      } catch {
        return // the server's own frames are canonical; a bad one is dropped, not fatal
      }
      this.receive(env)
    }
    ws.onclose = (e: CloseEvent) => {
      if (this.ws !== ws) return
      this.ws = undefined
      this.configured = false
      if (this.closed) return
      if (FINAL_CLOSES.has(e.code)) {
        this.closed = true
        this.ev.status('closed', e.reason || 'refused')
        this.ev.revoked?.(e.code, e.reason)
        return
      }
      this.scheduleReconnect(e.reason)
    }
    ws.onerror = () => {
      /* onclose follows */
    }
  }

  private receive(env: Envelope): void {
    if (env.type === MessageType.ServerInfo) {
      this.ev.serverInfo?.(env.body as ServerInfo)
      return
    }
    if (env.type === MessageType.Configuration && (env.stanzaId ?? 0) < 0 && !this.configured) {
      this.onConfigured(env)
    }
    if (env.type === MessageType.StartAnswer) {
      const prev = (env.body as StartAnswer).previousId
      this.unconfirmed = this.unconfirmed.filter((p) => (p.env.body as UserMessage).id !== prev)
    }
    if (env.type === MessageType.UserMessage) {
      const id = (env.body as UserMessage).id
      this.unconfirmed = this.unconfirmed.filter((p) => (p.env.body as UserMessage).id !== id)
    }
    this.ev.envelope(env)
  }

  private onConfigured(env: Envelope): void {
    this.configured = true
    this.attempts = 0
    const cid = env.conversationId ?? (env.body as Configuration).conversationId
    if (cid && cid !== this.conversationId) {
      this.conversationId = cid
      this.ev.bound?.(cid)
    }
    this.ev.status('open')
    // What the server may have missed, then what waited for the connection.
    const cutoff = Date.now() - 5 * 60_000
    this.unconfirmed = this.unconfirmed.filter((p) => p.sentAt > cutoff)
    const queued = new Set(this.outbox)
    for (const p of this.unconfirmed) if (!queued.has(p.env)) this.write(p.env)
    const out = this.outbox
    this.outbox = []
    for (const env of out) this.write({ ...env, conversationId: env.conversationId ?? this.conversationId })
    if (this.closing && this.outbox.length === 0) this.close()
  }

  private write(env: Envelope): void {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      this.outbox.push(env)
      return
    }
    this.ws.send(encodeEnvelope(env))
  }

  private scheduleReconnect(detail?: string): void {
    if (this.closed) return
    const min = this.opts.minDelay ?? 500
    const max = this.opts.maxDelay ?? 10_000
    const delay = Math.min(max, min * 2 ** this.attempts) * (0.75 + Math.random() * 0.5)
    this.attempts += 1
    this.ev.status(navigator.onLine === false ? 'offline' : 'reconnecting', detail)
    this.timer = setTimeout(() => this.open(true), delay)
  }
}
