// A conversation's debug timeline (GET /v1/conversations/{id}/timeline):
// its envelopes as the stream stored them, and from them where each turn's
// time went.
import { api } from '../api'
import type { Step } from '../rest.gen'

// The page's shapes are the REST contract's (proto-schemas/rest/openapi.json).
export type { Step, TimelinePage } from '../rest.gen'

// The marks of one answer's waterfall, in milliseconds since the Unix epoch
// (the stream's clock), those the timeline has.
export interface Timing {
  voice: boolean
  // A voice turn: the input audio's record, stored when the end-pointer
  // ended the turn; then the final transcript.
  speechEnd?: number
  transcript?: number
  // A typed turn: the user's message stored.
  sent?: number
  started?: number
  firstSentence?: number
  // The first sentence's speech synthesised (SentenceAudio).
  firstAudio?: number
}

// timing reads answer's marks from steps; undefined while its start is not
// among them.
export function timing(steps: Step[], answer: string): Timing | undefined {
  let start: Step | undefined
  for (const s of steps) if (s.type === 'StartAnswer' && s.messageId === answer) start = s
  if (!start) return undefined
  const asked = start.replyTo
  const find = (f: (s: Step) => boolean) => steps.find(f)?.timeMs
  const speechEnd = find((s) => s.type === 'AudioChunk' && s.messageId === asked)
  const transcript = find((s) => s.type === 'Transcription' && s.final === true && s.messageId === asked)
  return {
    voice: speechEnd !== undefined || transcript !== undefined,
    speechEnd,
    transcript,
    sent: transcript === undefined ? find((s) => s.type === 'UserMessage' && s.messageId === asked) : undefined,
    started: start.timeMs,
    firstSentence: find((s) => s.type === 'AssistantSentence' && s.messageId === answer && s.sequence === 1),
    firstAudio: find((s) => s.type === 'SentenceAudio' && s.messageId === answer && s.sequence === 1),
  }
}

// marks lists a timing's marks in order with their labels.
export function marks(t: Timing): { label: string; at: number }[] {
  const all: [string, number | undefined][] = t.voice
    ? [['end of speech', t.speechEnd], ['transcript', t.transcript], ['answer started', t.started], ['first sentence', t.firstSentence], ['first audio', t.firstAudio]]
    : [['sent', t.sent], ['answer started', t.started], ['first sentence', t.firstSentence], ['first audio', t.firstAudio]]
  return all.filter((m): m is [string, number] => m[1] !== undefined).map(([label, at]) => ({ label, at }))
}

interface Cached {
  steps: Step[]
  next: number
  busy: Promise<void>
}

const cache = new Map<string, Cached>()
const PAGE = 1000

// stepsUntil reads the conversation's timeline, from where it was left,
// until found(steps) holds or the stream has nothing more, and returns
// what it has. Calls for one conversation run one after the other.
export function stepsUntil(cid: string, found: (steps: Step[]) => boolean): Promise<Step[]> {
  let c = cache.get(cid)
  if (!c) {
    c = { steps: [], next: 0, busy: Promise.resolve() }
    cache.set(cid, c)
  }
  const entry = c
  const run = entry.busy.then(async () => {
    while (!found(entry.steps)) {
      const page = await api.timeline(cid, entry.next, PAGE)
      entry.steps.push(...page.steps)
      entry.next = page.next
      if (!page.more) break
    }
  })
  entry.busy = run.catch(() => {})
  return run.then(() => entry.steps)
}

// forgetTimeline drops what is cached of a conversation (it was deleted).
export function forgetTimeline(cid: string): void {
  cache.delete(cid)
}
