// What the open conversation's store does for messages written offline
// (src/chat/outbox.ts) and for delivery marks (Acknowledgement, 8): the
// store calls these at a few points (send, connection open, each envelope).
import { MessageType, type Acknowledgement, type Envelope, type SyncResponse, type UserMessage } from '../protocol'
import { outbox, type Outbox } from './outbox'

// Sender is the part of the connection a sync needs.
export interface Sender {
  send(type: number, body: object): Envelope
}

// syncOutbox sends the conversation's waiting messages in one SyncRequest.
export async function syncOutbox(conn: Sender, cid: string, box: Outbox = outbox): Promise<void> {
  const req = await box.syncRequest(cid)
  if (req) conn.send(MessageType.SyncRequest, req)
}

// Delivered remembers which sent messages the server has stored (their
// Acknowledgement came) for the check mark under them.
export class Delivered {
  private byStanza = new Map<number, string>()
  private ids = new Set<string>()
  private listeners = new Set<() => void>()
  private version = 0

  // expect notes that stanza carries message id.
  expect(stanza: number, id: string): void {
    this.byStanza.set(stanza, id)
  }

  ack(a: Acknowledgement): void {
    const id = this.byStanza.get(a.acknowledgedStanzaId)
    if (id === undefined) return
    this.byStanza.delete(a.acknowledgedStanzaId)
    if (!a.success) return
    this.ids.add(id)
    this.version++
    for (const f of this.listeners) f()
  }

  has = (id: string): boolean => this.ids.has(id)
  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f)
    return () => this.listeners.delete(f)
  }
  snapshot = (): number => this.version
}

export const delivered = new Delivered()

// offlineEnvelope takes what concerns the outbox and the delivery marks in
// an envelope of conversation cid: a SyncResponse settles the outbox, a
// synced message (a UserMessage with localId) leaves it, an
// Acknowledgement marks its message delivered. It reports whether the
// conversation should be read again (a SyncResponse came).
export function offlineEnvelope(env: Envelope, box: Outbox = outbox, marks: Delivered = delivered): boolean {
  switch (env.type) {
    case MessageType.SyncResponse:
      void box.settle(env.body as SyncResponse)
      return true
    case MessageType.UserMessage: {
      const b = env.body as UserMessage
      if (b.localId) {
        void box.remove(b.localId)
        marks.expect(-1, b.id)
        marks.ack({ conversationId: b.conversationId, acknowledgedStanzaId: -1, success: true }) // stored: the edge published it
      }
      return false
    }
    case MessageType.Acknowledgement:
      marks.ack(env.body as Acknowledgement)
      return false
  }
  return false
}
