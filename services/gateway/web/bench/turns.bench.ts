/// <reference lib="dom" />
// Send → first sentence rendered, and the page's memory over 500 turns. The
// fake model answers every message here with one sentence at once ("This is
// answer 1 to your message."); BenchmarkWebClient measures the same turn
// with a plain WebSocket client on the same stack just before.
import { expect, test, type Page } from '@playwright/test'
import { decodeEnvelope, encodeEnvelope, makeEnvelope, MessageType, type AssistantSentence, type StartAnswer } from '../src/protocol'
import { newId } from '../src/ids'
import { api, bench, composerReady, kib, messagesOf, newConversation, quantile, round, signedIn, writeResult } from './common'

declare global {
  interface Window {
    __turn?: { t0: number; seen: Set<string>; resolve: ((ms: number) => void) | null; done: Promise<number> | null; sent: number; arrived: number; yielded: number; painted: number }
    __bare?: { ws: WebSocket; frames: [number, number[]][] }
    __min?: { ws: WebSocket; next: Uint8Array<ArrayBuffer> | null; t0: number; done: ((ms: number) => void) | null }
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
  frameWall: number // when the sentence's frame reached the page's JavaScript, on the wall clock
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
    return { total, send: st.sent - st.t0, frame: st.arrived - st.t0, yielded: st.yielded - st.t0, painted: st.painted - st.t0, frameWall: performance.timeOrigin + st.arrived }
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

type Step = { type: string; timeMs: number; time: string; messageId?: string; replyTo?: string; sequence?: number }

// at is a step's time on the wall clock, in milliseconds with their fraction.
function at(s: { time: string }): number {
  const m = /\.(\d+)Z$/.exec(s.time)
  return Date.parse(s.time.replace(/\.\d+Z$/, 'Z')) + (m ? Number(`0.${m[1]}`) * 1000 : 0)
}

async function timeline(cid: string): Promise<Step[]> {
  const ctx = await api()
  try {
    const steps: Step[] = []
    for (let after = 0, more = true; more; ) {
      const res = await ctx.get(`/v1/conversations/${encodeURIComponent(cid)}/timeline?after=${after}&limit=1000`)
      expect(res.ok(), await res.text()).toBe(true)
      const page = (await res.json()) as { steps: Step[]; next: number; more: boolean }
      steps.push(...page.steps)
      after = page.next
      more = page.more
    }
    return steps
  } finally {
    await ctx.dispose()
  }
}

// delivery gives, for each turn (its user message id and the wall-clock
// time the client's JavaScript got the answer's first sentence), the time
// from that sentence stored in the stream to the client having it: the
// gateway, the socket, the browser's network process and the page's main
// thread. The same machine's clock on both sides.
function delivery(steps: Step[], turns: { asked: string; gotWall: number }[]): number[] {
  const out: number[] = []
  for (const t of turns) {
    const start = steps.find((x) => x.type === 'StartAnswer' && x.replyTo === t.asked)
    const first = start && steps.find((x) => x.type === 'AssistantSentence' && x.messageId === start.messageId && x.sequence === 1)
    if (first) out.push(t.gotWall - at(first))
  }
  return out
}

// stackOf gives, from a conversation's timeline (the stream's own clock),
// for every answer after the first skip, the time from the user's message
// stored to the answer's first sentence stored: the stack's part of a turn,
// whatever client sent it.
function stackOf(steps: Step[], skip: number): number[] {
  const out: number[] = []
  for (const start of steps.filter((x) => x.type === 'StartAnswer')) {
    const asked = steps.find((x) => x.type === 'UserMessage' && x.messageId === start.replyTo)
    const first = steps.find((x) => x.type === 'AssistantSentence' && x.messageId === start.messageId && x.sequence === 1)
    if (asked && first) out.push(at(first) - at(asked))
  }
  return out.slice(skip)
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
  const origin = await page.evaluate(() => performance.timeOrigin)
  const got: { asked: string; gotWall: number }[] = []
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
      if (!warm) got.push({ asked: id, gotWall: origin + sentences[0]!.at })
      previousId = answer
      return sentences.some((f) => (f.env.body as AssistantSentence).isFinal)
    }, { intervals: [5, 10, 20] }).toBe(true)
    return first
  })
  await ctx.close()
  const steps = await timeline(cid)
  const stack = stackOf(steps, bench.warmup)
  writeResult('bare', {
    'browser-ws-first-sentence-p50-ms': quantile(lat, 0.5),
    'browser-ws-delivery-p50-ms': quantile(delivery(steps, got), 0.5),
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
  const steps = await timeline(cid)
  const stack = stackOf(steps, bench.warmup)
  // The measured turns are the conversation's last user messages, in order.
  const asked = steps.filter((x) => x.type === 'UserMessage').slice(-times.length)
  const got = times.map((t, i) => ({ asked: asked[i]?.messageId ?? '', gotWall: t.frameWall }))
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
    'page-delivery-p50-ms': quantile(delivery(steps, got), 0.5),
  }, { stackMs: stack.map((x) => round(x, 2)), turns: lat.length, samplesMs: times.map((t, i) => ({ total: round(t.total, 1), send: round(t.send, 1), frame: round(t.frame, 1), wire: round(rtt[i] ?? 0, 1) })) })
})

// The least a page can do for the same turn, in the same browser: on Enter
// it sends the envelope (made in Node with the page's codec), clears the
// text box and appends the message to a list; when a frame holding the
// answer's text arrives it appends that too. No framework, no store, no
// virtual list: what a page cannot avoid adding over the bare WebSocket.
test('send → first sentence rendered, minimal page', async ({ browser }) => {
  const ctx = await signedIn(browser)
  const page = await ctx.newPage()
  await page.goto('/healthz') // the gateway's origin; a plain text document
  const cid = await newConversation('Bench: minimal page')
  await page.evaluate(() => new Promise<void>((resolve, reject) => {
    document.body.innerHTML = '<div id="list" style="height:600px;overflow:auto;font:16px sans-serif"></div><textarea id="composer"></textarea>'
    const list = document.getElementById('list')!
    const box = document.getElementById('composer') as HTMLTextAreaElement
    const ws = new WebSocket(`ws://${location.host}/v1/ws`)
    ws.binaryType = 'arraybuffer'
    const st: NonNullable<Window['__min']> = { ws, next: null, t0: 0, done: null }
    window.__min = st
    const add = (text: string) => {
      const p = document.createElement('p')
      p.textContent = text
      list.appendChild(p)
      list.scrollTop = list.scrollHeight
    }
    box.addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' || !st.next) return
      e.preventDefault()
      st.t0 = performance.now()
      ws.send(st.next)
      add(box.value)
      box.value = ''
    })
    // msgpack keeps strings as UTF-8: the answer's text is in the frame as is.
    const utf8 = new TextDecoder()
    ws.onmessage = (e: MessageEvent) => {
      const text = utf8.decode(new Uint8Array(e.data as ArrayBuffer))
      const i = text.indexOf('This is answer')
      if (i < 0 || !st.done) return
      add(text.slice(i, text.indexOf('.', i) + 1))
      const done = st.done
      st.done = null
      done(performance.now() - st.t0)
    }
    ws.onopen = () => resolve()
    ws.onerror = () => reject(new Error('WebSocket failed'))
  }))
  const send = (b: Uint8Array) => page.evaluate((b) => window.__min!.ws.send(new Uint8Array(b)), Array.from(b))
  let stanza = 0
  await send(encodeEnvelope(makeEnvelope(MessageType.Configuration, {
    conversationId: cid, clientVersion: 'bench/1', device: 'web', features: ['streaming', 'partial_responses', 'reasoning_steps', 'tool_use'],
  }, { stanzaId: ++stanza, conversationId: cid })))
  const box = page.locator('#composer')
  let previousId: string | undefined
  const lat = await paced(bench.turns, bench.warmup, async (i, warm) => {
    const id = newId('am')
    const content = `Minimal turn ${i}${warm ? ' (warm-up)' : ''}`
    const bytes = encodeEnvelope(makeEnvelope(MessageType.UserMessage, { id, previousId, conversationId: cid, content, timestamp: Date.now() },
      { stanzaId: ++stanza, conversationId: cid }))
    await page.evaluate((b) => { window.__min!.next = new Uint8Array(b) }, Array.from(bytes))
    await box.fill(content)
    const done = page.evaluate(() => new Promise<number>((r) => { window.__min!.done = r }))
    await box.press('Enter')
    const ms = await done
    // The next message follows this answer: wait until it is stored.
    await expect.poll(async () => {
      const m = (await messagesOf(cid)).at(-1)
      previousId = m?.id
      return m?.role === 'assistant' && m.status === 'completed'
    }, { intervals: [10, 20, 50] }).toBe(true)
    return ms
  })
  await ctx.close()
  writeResult('minimal', {
    'minimal-page-first-sentence-p50-ms': quantile(lat, 0.5),
    'minimal-page-first-sentence-p99-ms': quantile(lat, 0.99),
  }, { turns: lat.length, samplesMs: lat.map((x) => round(x, 1)) })
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
