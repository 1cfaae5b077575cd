// The newest rows of the open conversation drawn straight into the DOM, for
// the moments React has not caught up yet (src/chat/live.ts decides when):
// the message just sent and the start of its answer. Each row is the markup
// MessageView gives the same message, less what only matters once React has
// it (the action bar, the parts of an answer, Markdown: the text shows as
// typed until then). Text goes in as text nodes, never as HTML.
import type { ChatMessage } from './model'

// The classes of MessageView's markup (and of MessageList's row wrapper, as
// a block instead of absolutely placed).
const ROW = 'px-3 py-3'
const ARTICLE = 'group flex flex-col gap-1'
const USER_BUBBLE = 'max-w-[85%] rounded-2xl rounded-br-sm bg-indigo-600 px-4 py-2 whitespace-pre-wrap text-white'
const ANSWER_BOX = 'w-full max-w-3xl'
const CARET = 'ml-0.5 inline-block h-4 w-2 animate-pulse bg-slate-400 align-middle'

function el(tag: string, className: string, text?: string): HTMLElement {
  const e = document.createElement(tag)
  if (className) e.className = className
  if (text !== undefined) e.textContent = text
  return e
}

// signature is what a row's markup depends on: a row is drawn again only
// when it changes.
export function signature(m: ChatMessage): string {
  return `${m.role}\u0000${m.status}\u0000${m.voice ? 1 : 0}\u0000${m.content}`
}

// rowOf builds the row of one message.
export function rowOf(m: ChatMessage): HTMLElement {
  const row = el('div', ROW)
  const user = m.role === 'user'
  const a = el('article', `${ARTICLE} ${user ? 'items-end' : 'items-start'}`)
  a.setAttribute('aria-label', user ? 'Your message' : 'Alicia\'s answer')
  a.dataset.messageId = m.id
  a.dataset.role = m.role
  a.dataset.status = m.status
  if (user) {
    const bubble = el('div', USER_BUBBLE)
    if (m.voice) bubble.appendChild(el('span', 'sr-only', 'Spoken: '))
    bubble.appendChild(document.createTextNode(m.content))
    a.appendChild(bubble)
  } else {
    const box = el('div', ANSWER_BOX)
    const streaming = m.status === 'streaming' || m.status === 'pending'
    if (m.content) {
      const prose = el('div', 'prose-alicia break-words')
      prose.appendChild(el('p', 'whitespace-pre-wrap', m.content))
      box.appendChild(prose)
      if (streaming) box.appendChild(el('span', CARET)).setAttribute('aria-hidden', 'true')
    } else if (streaming) box.appendChild(el('span', 'text-slate-500', 'Thinking…'))
    a.appendChild(box)
  }
  row.appendChild(a)
  return row
}

// ChatTail keeps a container's children equal to the rows of the messages
// it is given, in order, and keeps the list at its end while the reader is
// there. The container is React's (an element it renders without
// children), its children are the tail's alone.
export class ChatTail {
  private rows: { id: string; sig: string; node: HTMLElement }[] = []
  private scrolling = 0

  constructor(
    private readonly container: HTMLElement,
    private readonly scroller: HTMLElement,
    // Whether the reader is at the end of the list (then it follows).
    private readonly atEnd: () => boolean,
  ) {
    // What the tail shows is shown again by React a moment later: assistive
    // technology reads React's rows, once.
    container.setAttribute('aria-hidden', 'true')
  }

  get size(): number {
    return this.rows.length
  }

  render(messages: ChatMessage[]): void {
    let changed = false
    const next: typeof this.rows = []
    for (const [i, m] of messages.entries()) {
      const sig = signature(m)
      const old = this.rows[i]
      if (old && old.id === m.id && old.sig === sig) {
        next.push(old)
        continue
      }
      const node = rowOf(m)
      if (old) old.node.replaceWith(node)
      else this.container.appendChild(node)
      next.push({ id: m.id, sig, node })
      changed = true
    }
    for (const old of this.rows.slice(messages.length)) {
      old.node.remove()
      changed = true
    }
    this.rows = next
    if (changed && next.length > 0 && this.atEnd()) this.follow()
  }

  clear(): void {
    this.render([])
  }

  dispose(): void {
    cancelAnimationFrame(this.scrolling)
    this.scrolling = 0
    this.container.replaceChildren()
    this.rows = []
  }

  // follow scrolls to the end in the next frame, where the layout is done
  // for the paint anyway (reading scrollHeight now would force it here).
  private follow(): void {
    if (this.scrolling) return
    this.scrolling = requestAnimationFrame(() => {
      this.scrolling = 0
      if (this.rows.length > 0) this.scroller.scrollTop = this.scroller.scrollHeight
    })
  }
}
