/// <reference lib="dom" />
// Send → first sentence rendered, and the page's memory over 500 turns. The
// fake model answers every message here with one sentence at once ("This is
// answer 1 to your message."); BenchmarkWebClient measures the same turn
// with a plain WebSocket client on the same stack just before.
import { expect, test, type Page } from '@playwright/test'
import { decodeEnvelope, encodeEnvelope, makeEnvelope, MessageType, type AssistantSentence, type StartAnswer } from '../src/protocol'
import { newId } from '../src/ids'
import { api, bench, composerReady, kib, newConversation, quantile, round, signedIn, writeResult } from './common'

declare global {
  interface Window {
    __turn?: { t0: number; seen: Set<string>; resolve: ((ms: number) => void) | null; done: Promise<number> | null; sent: number; arrived: number; yielded: number; painted: number }
    __bare?: { ws: WebSocket; frames: [number, number[]][] }
  }
}

// instrument notes the time of the Enter key press in the composer (a
// capturing listener: before the page's own) and resolves, when a new
// answer's first sentence is in the DOM (a MutationObserver), with the time
// since the press.
function instrument(): void {
  const st: NonNullable<Window['__turn']> = { t0: 0, seen: new Set(), resolve: null, done: null, sent: 0, arrived: 0, yielded: 0, painted: 0 }
  window.__turn = st
  // Where the time goes: the page's send on its WebSocket, and the last
  // frame that arrived before the sentence showed.
  const send = WebSocket.prototype.send
  WebSocket.prototype.send = function (this: WebSocket, data) {
    if (st.resolve && !st.sent) st.sent = performance.now()
    return send.call(this, data)
  }
  const answers = (): NodeListOf<HTMLElement> => document.querySelectorAll<HTMLElement>('article[data-role="assistant"]')
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' || e.shiftKey || !(e.target instanceof HTMLTextAreaElement) || e.target.id !== 'composer') return
    st.t0 = performance.now()
    st.sent = 0
    st.arrived = 0
    st.yielded = 0
    st.painted = 0
    // When the main thread is first free again after the key's task (the
    // page's render of the sent message), and after the frame that paints it.
    const ch = new MessageChannel()
    ch.port1.onmessage = () => {
      if (!st.yielded) st.yielded = performance.now()
    }
    ch.port2.postMessage(0)
    requestAnimationFrame(() => {
      const c2 = new MessageChannel()
      c2.port1.onmessage = () => (st.painted = performance.now())
      c2.port2.postMessage(0)
    })
    answers().forEach((a) => st.seen.add(a.dataset.messageId ?? ''))
    st.done = new Promise((r) => (st.resolve = r))
  }, true)
  new MutationObserver(() => {
    if (!st.resolve) return
    for (const a of answers()) {
      const id = a.dataset.messageId ?? ''
      if (st.seen.has(id) || !a.textContent?.includes('This is answer')) continue
      const now = performance.now()
      st.seen.add(id)
      const r = st.resolve
      st.resolve = null
      r(now - st.t0)
      return
    }
  }).observe(document.body, { childList: true, subtree: true, characterData: true })
}

// watchFrames notes, before the page's scripts run, when each frame of its
// WebSocket reaches the page's JavaScript (a listener added first).
function watchFrames(): void {
  const Native = window.WebSocket
  window.WebSocket = class extends Native {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols)
      this.addEventListener('message', () => {
        const st = window.__turn
        if (st?.resolve) st.arrived = performance.now()
      })
    }
  }
}

async function openNew(page: Page, title: string): Promise<string> {
  const cid = await newConversation(title)
  await page.context().addInitScript(watchFrames)
  await page.goto(`/c/${encodeURIComponent(cid)}`)
  await composerReady(page)
  await expect(page.getByTestId('connection')).toHaveAttribute('data-status', 'open')
  await page.evaluate(instrument)
  return cid
}

interface TurnTimes {
  total: number // Enter → the first sentence in the DOM
  send: number // Enter → the page's ws.send
  frame: number // Enter → the sentence's frame in the page's JavaScript
  yielded: number // Enter → the main thread free again after the key's task
  painted: number // Enter → the end of the frame that paints the sent message
}

// turn sends text with the Enter key, waits for its whole answer and
// returns the times from the key press.
async function turn(page: Page, text: string): Promise<TurnTimes> {
  const composer = page.getByLabel('Message Alicia')
  await composer.fill(text)
  await composer.press('Enter')
  const t = await page.evaluate(async () => {
    const st = window.__turn!
    const d = st.done
    if (!d) throw new Error('the Enter key press was not seen')
    st.done = null
    const total = await d
    return { total, send: st.sent - st.t0, frame: st.arrived - st.t0, yielded: st.yielded - st.t0, painted: st.painted - st.t0 }
  })
  await expect(page.locator('article[data-role="assistant"]').last()).toHaveAttribute('data-status', 'completed')
  await expect(composer).toHaveValue('')
  return t
}

// paced runs warm-up then measured turns, each starting bench.paceMs after
// the one before, and returns the measured ones.
async function paced<T>(n: number, warmup: number, run: (i: number, warm: boolean) => Promise<T>): Promise<T[]> {
  const out: T[] = []
  let next = Date.now()
  for (let i = 0; i < warmup + n; i++) {
    await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now()))) // the pacing
    next = Date.now() + bench.paceMs
    const r = await run(i < warmup ? i : i - warmup, i < warmup)
    if (i >= warmup) out.push(r)
  }
  return out
}

// stackTimes reads a conversation's timeline (the stream's own clock) and
// gives, for every answer after the first skip, the time from the user's
// message stored to the answer's first sentence stored: the stack's part of
// a turn, whatever client sent it.
async function stackTimes(cid: string, skip: number): Promise<number[]> {
  const ctx = await api()
  try {
    const steps: { type: string; timeMs: number; time: string; messageId?: string; replyTo?: string; sequence?: number }[] = []
    for (let after = 0, more = true; more; ) {
      const res = await ctx.get(`/v1/conversations/${encodeURIComponent(cid)}/timeline?after=${after}&limit=1000`)
      expect(res.ok(), await res.text()).toBe(true)
      const page = (await res.json()) as { steps: typeof steps; next: number; more: boolean }
      steps.push(...page.steps)
      after = page.next
      more = page.more
    }
    const at = (s: { time: string }) => {
      // RFC 3339 with nanoseconds: milliseconds with their fraction.
      const m = /\.(\d+)Z$/.exec(s.time)
      return Date.parse(s.time.replace(/\.\d+Z$/, 'Z')) + (m ? Number(`0.${m[1]}`) * 1000 : 0)
    }
    const out: number[] = []
    for (const start of steps.filter((x) => x.type === 'StartAnswer')) {
      const asked = steps.find((x) => x.type === 'UserMessage' && x.messageId === start.replyTo)
      const first = steps.find((x) => x.type === 'AssistantSentence' && x.messageId === start.messageId && x.sequence === 1)
      if (asked && first) out.push(at(first) - at(asked))
    }
    return out.slice(skip)
  } finally {
    await ctx.dispose()
  }
}

// A WebSocket client without the app, in the same browser: the same turn
// with nothing rendered, to tell what the browser's own WebSocket adds from
// what the page adds. Envelopes are made and read in Node with the page's
// codec; the times are the page's.
test('send → first sentence, browser WebSocket without the app', async ({ browser }) => {
  const ctx = await signedIn(browser)
  const page = await ctx.newPage()
  await page.goto('/favicon.svg') // the gateway's origin, nothing running
  await page.evaluate(
    () =>
      new Promise<void>((resolve, reject) => {
        const ws = new WebSocket(`ws://${location.host}/v1/ws`)
        ws.binaryType = 'arraybuffer'
        const frames: [number, number[]][] = []
        window.__bare = { ws, frames }
        ws.onmessage = (e: MessageEvent) => frames.push([performance.now(), Array.from(new Uint8Array(e.data as ArrayBuffer))])
        ws.onopen = () => resolve()
        ws.onerror = () => reject(new Error('WebSocket failed'))
      }),
  )
  let stanza = 0
  const sendEnv = (bytes: Uint8Array): Promise<number> =>
    page.evaluate((b) => {
      const bare = window.__bare!
      bare.frames.length = 0
      const t0 = performance.now()
      bare.ws.send(new Uint8Array(b))
      return t0
    }, Array.from(bytes))
  const frames = async (): Promise<{ at: number; env: ReturnType<typeof decodeEnvelope> }[]> =>
    (await page.evaluate(() => window.__bare!.frames)).map(([at, b]) => ({ at, env: decodeEnvelope(new Uint8Array(b)) }))

  // A new conversation, configured as the page configures its own.
  await sendEnv(encodeEnvelope(makeEnvelope(MessageType.Configuration, {
    clientVersion: 'bench/1', device: 'web', features: ['streaming', 'partial_responses', 'reasoning_steps', 'tool_use'],
  }, { stanzaId: ++stanza })))
  let cid = ''
  await expect.poll(async () => {
    cid = (await frames()).find((f) => f.env.type === MessageType.Configuration && (f.env.stanzaId ?? 0) < 0)?.env.conversationId ?? ''
    return cid
  }).not.toBe('')

  let previousId: string | undefined
  const lat = await paced(bench.turns, bench.warmup, async (i, warm) => {
    const id = newId('am')
    const t0 = await sendEnv(encodeEnvelope(makeEnvelope(MessageType.UserMessage, {
      id, previousId, conversationId: cid, content: `Browser turn ${i}${warm ? ' (warm-up)' : ''}`, timestamp: Date.now(),
    }, { stanzaId: ++stanza, conversationId: cid })))
    let first = 0
    await expect.poll(async () => {
      const fs = await frames()
      const start = fs.find((f) => f.env.type === MessageType.StartAnswer && (f.env.body as StartAnswer).previousId === id)
      if (!start) return false
      const answer = (start.env.body as StartAnswer).id
      const sentences = fs.filter((f) => f.env.type === MessageType.AssistantSentence && (f.env.body as AssistantSentence).previousId === answer)
      if (sentences.length === 0) return false
      first = sentences[0]!.at - t0
      previousId = answer
      return sentences.some((f) => (f.env.body as AssistantSentence).isFinal)
    }, { intervals: [5, 10, 20] }).toBe(true)
    return first
  })
  await ctx.close()
  const stack = await stackTimes(cid, bench.warmup)
  writeResult('bare', {
    'browser-ws-first-sentence-p50-ms': quantile(lat, 0.5),
    'browser-ws-first-sentence-p99-ms': quantile(lat, 0.99),
    'browser-ws-stack-p50-ms': quantile(stack, 0.5),
  }, { turns: lat.length, samplesMs: lat.map((x) => round(x, 1)), stackMs: stack.map((x) => round(x, 2)) })
})

test('send → first sentence rendered', async ({ browser }) => {
  const ctx = await signedIn(browser)
  const page = await ctx.newPage()
  const cid = await openNew(page, 'Bench: send to first sentence')
  // The browser's network layer (CDP, its own clock): when the page's
  // UserMessage frame went out and the answer's first sentence frame came
  // in, to tell the time on the wire and in the stack from the time the
  // frame waits in the page before its JavaScript sees it.
  const cdp = await ctx.newCDPSession(page)
  await cdp.send('Network.enable')
  const net = { armed: false, sent: 0, recv: 0 }
  cdp.on('Network.webSocketFrameSent', (e) => {
    if (net.armed && !net.sent) net.sent = e.timestamp
  })
  cdp.on('Network.webSocketFrameReceived', (e) => {
    if (!net.armed || !net.sent || net.recv || e.response.opcode !== 2) return
    try {
      if (decodeEnvelope(Buffer.from(e.response.payloadData, 'base64')).type === MessageType.AssistantSentence) net.recv = e.timestamp
    } catch {
      /* not an envelope */
    }
  })
  const rtt: number[] = []
  const times = await paced(bench.turns, bench.warmup, async (i, warm) => {
    Object.assign(net, { armed: true, sent: 0, recv: 0 })
    const t = await turn(page, `Page turn ${i}${warm ? ' (warm-up)' : ''}`)
    await expect.poll(() => net.recv).toBeGreaterThan(0)
    net.armed = false
    if (!warm) rtt.push((net.recv - net.sent) * 1000)
    return t
  })
  await ctx.close()
  const stack = await stackTimes(cid, bench.warmup)
  const lat = times.map((t) => t.total)
  const waited = times.map((t, i) => t.frame - t.send - (rtt[i] ?? 0))
  writeResult('turns', {
    'page-first-sentence-p50-ms': quantile(lat, 0.5),
    'page-first-sentence-p99-ms': quantile(lat, 0.99),
    'page-first-sentence-max-ms': Math.max(...lat),
    'page-key-to-send-p50-ms': quantile(times.map((t) => t.send), 0.5),
    'page-key-to-frame-p50-ms': quantile(times.map((t) => t.frame), 0.5),
    'page-frame-to-dom-p50-ms': quantile(times.map((t) => t.total - t.frame), 0.5),
    'page-wire-p50-ms': quantile(rtt, 0.5),
    'page-frame-waits-p50-ms': quantile(waited, 0.5),
    'page-stack-p50-ms': quantile(stack, 0.5),
    'page-key-task-p50-ms': quantile(times.map((t) => t.yielded), 0.5),
    'page-key-painted-p50-ms': quantile(times.map((t) => t.painted), 0.5),
  }, { stackMs: stack.map((x) => round(x, 2)), turns: lat.length, samplesMs: times.map((t, i) => ({ total: round(t.total, 1), send: round(t.send, 1), frame: round(t.frame, 1), wire: round(rtt[i] ?? 0, 1) })) })
})

test('memory over 500 turns', async ({ browser }) => {
  const ctx = await signedIn(browser)
  const page = await ctx.newPage()
  await openNew(page, 'Bench: memory')
  const cdp = await ctx.newCDPSession(page)
  await cdp.send('HeapProfiler.enable')
  const sample = async (turns: number) => {
    await cdp.send('HeapProfiler.collectGarbage')
    await cdp.send('HeapProfiler.collectGarbage')
    const heap = await cdp.send('Runtime.getHeapUsage')
    const dom = await cdp.send('Memory.getDOMCounters')
    // The nodes in the document, and the renderer's node counter: the
    // counter also holds the text nodes the textarea's undo history keeps
    // (two per message typed, Blink's, bounded by its undo depth).
    const [elements, liveNodes] = await page.evaluate(() => {
      const w = document.createTreeWalker(document, NodeFilter.SHOW_ALL)
      let n = 0
      while (w.nextNode()) n++
      return [document.getElementsByTagName('*').length, n]
    })
    return { turns, heapKiB: kib(heap.usedSize), liveNodes, elements, nodeCounter: dom.nodes, listeners: dom.jsEventListeners }
  }
  const samples = [await sample(0)]
  for (let i = 1; i <= bench.memoryTurns; i++) {
    await turn(page, `Memory turn ${i}`)
    if (i % 100 === 0) samples.push(await sample(i))
  }
  await ctx.close()
  // Growth per 100 turns: least squares over the samples from turn 100 on
  // (the first 100 also load the Markdown renderer and warm the caches),
  // and from the first sample to the last.
  const tail = samples.filter((s) => s.turns >= 100)
  const slope = (ys: number[], xs: number[]): number => {
    const n = xs.length, mx = xs.reduce((a, b) => a + b, 0) / n, my = ys.reduce((a, b) => a + b, 0) / n
    const num = xs.reduce((a, x, i) => a + (x - mx) * (ys[i]! - my), 0)
    const den = xs.reduce((a, x) => a + (x - mx) ** 2, 0)
    return den === 0 ? NaN : num / den
  }
  const first = samples[0]!, last = samples.at(-1)!
  writeResult('memory', {
    'heap-growth-KiB-per-100-turns': 100 * slope(tail.map((s) => s.heapKiB), tail.map((s) => s.turns)),
    'heap-growth-all-KiB-per-100-turns': (100 * (last.heapKiB - first.heapKiB)) / Math.max(1, last.turns - first.turns),
    'heap-start-KiB': first.heapKiB,
    'heap-end-KiB': last.heapKiB,
    'dom-live-nodes-start': first.liveNodes,
    'dom-live-nodes-end': last.liveNodes,
    'dom-elements-end': last.elements,
    'dom-node-counter-end': last.nodeCounter,
  }, { samples })
})
