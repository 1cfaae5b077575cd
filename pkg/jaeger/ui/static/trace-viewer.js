// Alicia's trace viewer (pkg/jaeger/ui): the traces Jaeger keeps, read from
// its query API on this page's origin. Routes (in the URL's fragment, so
// that a reload or a shared link opens the same view):
//
//   #/?service=S                   recent traces of service S (of every service without one)
//   #/conversation/<id>?service=S  traces whose spans carry alicia.conversation_id=<id>
//   #/trace/<id>?span=<span id>    one trace: its spans as a waterfall, one span's details
//
// No framework: the DOM is built with h() (never from HTML strings: span
// names and attributes are data).

// ALL is the service choice that lists every service's traces, merged: a
// turn's spans are in several services (alicia-gateway, alicia-llm, …).
const ALL = ''
const LIST_LIMIT = 50
const CONVERSATION_TAG = 'alicia.conversation_id'
const SCOPE_TAG = 'otel.scope.name'
const MODULE_PREFIX = 'github.com/alicia-voice/alicia/'
// Tags the details show as facts rather than among the attributes.
const FACT_TAGS = new Set([SCOPE_TAG, 'otel.scope.version', 'span.kind', 'otel.status_code', 'otel.status_description', 'error'])

const main = document.getElementById('main')
const status = document.getElementById('status')
const raw = document.getElementById('raw')

// h makes an element: attributes (on* are listeners), then children
// (strings become text, null and false are skipped).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v)
    else if (k === 'class') el.className = v
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue
    el.append(c instanceof Node ? c : String(c))
  }
  return el
}

// apiURL resolves a query API path against the page's base (Jaeger's base
// path, when one is configured).
function apiURL(path, params) {
  const u = new URL('api/' + path, document.baseURI)
  for (const [k, v] of Object.entries(params || {})) u.searchParams.set(k, v)
  return u
}

async function getJSON(url, signal) {
  const resp = await fetch(url, { signal, headers: { Accept: 'application/json' } })
  let body = null
  try {
    body = await resp.json()
  } catch {
    // not JSON: the status says it
  }
  if (!resp.ok || body?.errors?.length) {
    const err = new Error(body?.errors?.[0]?.msg || `${resp.status} ${resp.statusText}`)
    err.status = body?.errors?.[0]?.code || resp.status
    throw err
  }
  return body
}

// Formatting. Jaeger's times are microseconds.
function fmtDuration(us) {
  if (us < 1000) return `${Math.round(us)} µs`
  if (us < 1e6) return `${+(us / 1e3).toPrecision(3)} ms`
  if (us < 6e7) return `${+(us / 1e6).toPrecision(3)} s`
  const m = Math.floor(us / 6e7)
  return `${m} min ${Math.round((us - m * 6e7) / 1e6)} s`
}
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false })
const dateTimeFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false,
})
function fmtStart(us, withDate) {
  const d = new Date(us / 1000)
  const today = new Date().toDateString() === d.toDateString()
  const ms = String(d.getMilliseconds()).padStart(3, '0')
  return h('time', { datetime: d.toISOString() }, (withDate || !today ? dateTimeFmt : timeFmt).format(d), h('span', { class: 'ms' }, `.${ms}`))
}
const shortScope = (s) => (s || '').replace(MODULE_PREFIX, '')
const tagValue = (tags, key) => tags?.find((t) => t.key === key)?.value
const isError = (span) => tagValue(span.tags, 'error') === true || tagValue(span.tags, 'otel.status_code') === 'ERROR'
function colorClass(scope) {
  let x = 0
  for (const ch of scope || '') x = (x * 31 + ch.charCodeAt(0)) >>> 0
  return `c${x % 8}`
}
function fmtValue(t) {
  if (t.type === 'binary') return `(${t.value?.length ?? 0} bytes, base64) ${t.value}`
  return typeof t.value === 'string' ? t.value : JSON.stringify(t.value)
}

// model turns a trace of the API into what the views show: its spans
// nested by parent (CHILD_OF, else FOLLOWS_FROM, within the trace), each
// node's children in start order, the roots first by start.
function model(trace) {
  const nodes = new Map()
  for (const span of trace.spans) nodes.set(span.spanID, { span, children: [], parent: null, depth: 0 })
  const roots = []
  for (const n of nodes.values()) {
    const refs = (n.span.references || []).filter((r) => r.traceID === n.span.traceID && nodes.has(r.spanID) && r.spanID !== n.span.spanID)
    const ref = refs.find((r) => r.refType === 'CHILD_OF') || refs[0]
    if (ref) {
      n.parent = nodes.get(ref.spanID)
      n.parent.children.push(n)
    } else {
      n.orphan = (n.span.references || []).length > 0 // its parent is not (yet) in the trace
      roots.push(n)
    }
  }
  const byStart = (a, b) => a.span.startTime - b.span.startTime
  // Real roots before spans whose parent is missing.
  roots.sort((a, b) => (a.orphan - b.orphan) || byStart(a, b))
  // Depth-first order; a span already placed is not placed again (a cycle
  // of references would otherwise hide its spans or never end).
  const order = []
  const seen = new Set()
  const visit = (n, depth) => {
    if (seen.has(n)) return
    seen.add(n)
    n.depth = depth
    order.push(n)
    n.children.sort(byStart)
    for (const c of n.children) visit(c, depth + 1)
  }
  for (const r of roots) visit(r, 0)
  for (const n of nodes.values()) {
    if (!seen.has(n)) {
      n.parent = null
      roots.push(n)
      visit(n, 0)
    }
  }
  let start = Infinity
  let end = -Infinity
  for (const span of trace.spans) {
    start = Math.min(start, span.startTime)
    end = Math.max(end, span.startTime + span.duration)
  }
  const first = roots[0]?.span
  let conversation = first && tagValue(first.tags, CONVERSATION_TAG)
  if (!conversation) {
    const spans = [...trace.spans].sort((a, b) => a.startTime - b.startTime)
    conversation = spans.map((s) => tagValue(s.tags, CONVERSATION_TAG)).find((v) => v)
  }
  const services = [...new Set(Object.values(trace.processes || {}).map((p) => p.serviceName))]
  return {
    id: trace.traceID, trace, nodes, roots, order, start, end, duration: Math.max(end - start, 0),
    name: first ? first.operationName : '(no spans)', conversation, services,
    errors: trace.spans.filter(isError).length,
  }
}

// Routing.
function route() {
  const [path, query] = location.hash.replace(/^#/, '').split('?')
  const params = new URLSearchParams(query || '')
  const parts = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p)
    } catch {
      return p
    }
  })
  if (parts[0] === 'trace' && parts[1]) return { view: 'trace', id: parts[1].toLowerCase(), span: params.get('span') }
  if (parts[0] === 'conversation' && parts[1]) return { view: 'conversation', conversation: parts[1], service: params.get('service') }
  return { view: 'list', service: params.get('service') }
}
const listHash = (service) => (service ? `#/?service=${encodeURIComponent(service)}` : '#/')
const traceHash = (id, span) => `#/trace/${id}${span ? `?span=${span}` : ''}`
const conversationHash = (cid, service) =>
  `#/conversation/${encodeURIComponent(cid)}${service ? `?service=${encodeURIComponent(service)}` : ''}`

let current = null // the AbortController of the view on screen

async function render() {
  current?.abort()
  const ctl = new AbortController()
  current = ctl
  const r = route()
  try {
    if (r.view === 'trace') await renderTrace(r, ctl.signal)
    else await renderList(r, ctl.signal)
  } catch (err) {
    if (ctl.signal.aborted) return
    show(h('h1', { tabindex: -1 }, 'Something went wrong'), h('p', { class: 'notice error', role: 'alert' }, err.message))
  }
}

// show replaces the page's content and, after a navigation, moves the focus
// to its heading (a screen reader announces the new view).
let firstRender = true
function show(...children) {
  main.replaceChildren(...children)
  const heading = main.querySelector('h1')
  if (heading && !firstRender) heading.focus({ preventScroll: false })
  firstRender = false
}

function announce(text) {
  status.textContent = text
}

let servicesCache = null
async function services(signal) {
  if (!servicesCache) servicesCache = ((await getJSON(apiURL('services'), signal)).data || []).slice().sort() // Jaeger's order is none
  return servicesCache
}

async function renderList(r, signal) {
  const conversation = r.view === 'conversation' ? r.conversation : null
  announce('Loading traces…')
  let known = []
  try {
    known = await services(signal)
  } catch (err) {
    if (signal.aborted) throw err
  }
  const service = r.service || ALL
  // Jaeger searches one service at a time: every service's search, merged
  // by trace (a trace found in several is the same whole trace).
  const searched = service ? [service] : known
  const urls = searched.map((s) => {
    const params = { service: s, limit: LIST_LIMIT }
    if (conversation) params.tags = JSON.stringify({ [CONVERSATION_TAG]: conversation })
    return apiURL('traces', params)
  })
  raw.href = (urls.length === 1 ? urls[0] : apiURL('services')).href
  let traces = []
  let failure = null
  try {
    const found = new Map()
    for (const res of await Promise.all(urls.map((u) => getJSON(u, signal)))) {
      for (const t of res.data || []) {
        if (t.spans?.length && !found.has(t.traceID)) found.set(t.traceID, t)
      }
    }
    traces = [...found.values()].map(model)
  } catch (err) {
    if (signal.aborted) throw err
    failure = err
  }
  traces.sort((a, b) => b.start - a.start)
  traces = traces.slice(0, LIST_LIMIT)
  document.title = conversation ? `Conversation ${conversation} · Traces · Alicia` : 'Traces · Alicia'

  const choices = [...new Set([ALL, service, ...known])]
  const label = (s) => s || 'All services'
  const picker = h('select', {
    id: 'service',
    onchange: (e) => { location.hash = conversation ? conversationHash(conversation, e.target.value) : listHash(e.target.value) },
  }, choices.map((s) => h('option', { value: s, selected: s === service }, label(s))))
  const heading = conversation
    ? h('h1', { tabindex: -1 }, 'Traces of conversation ', h('code', {}, conversation))
    : h('h1', { tabindex: -1 }, 'Recent traces')
  const toolbar = h('div', { class: 'bar-row' }, heading, h('span', { class: 'spacer' }),
    h('label', {}, 'Service ', picker),
    h('button', { type: 'button', onclick: () => { servicesCache = null; render() } }, 'Refresh'))

  let body
  if (failure) {
    body = h('p', { class: 'notice error', role: 'alert' }, `Jaeger did not answer the search: ${failure.message}`)
  } else if (!traces.length) {
    body = h('p', { class: 'notice' }, conversation
      ? `No trace ${service ? `of service ${service} ` : ''}carries ${CONVERSATION_TAG}=${conversation} (in the last two days of what Jaeger keeps).`
      : `No traces${service ? ` of service ${service}` : ''} yet. A turn's spans arrive a few seconds after it ends (the exporter sends them in batches).`)
  } else {
    body = h('div', { class: 'scroll-x' }, h('table', { class: 'traces' },
      h('caption', { class: 'visually-hidden' }, conversation ? `Traces of conversation ${conversation}, newest first` : `Recent traces of ${label(service).toLowerCase()}, newest first`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Trace', h('span', { class: 'hide-narrow' }, ' (root span)')),
        h('th', { scope: 'col' }, 'Started'),
        h('th', { scope: 'col', class: 'num' }, 'Duration'),
        h('th', { scope: 'col', class: 'num' }, 'Spans'),
        h('th', { scope: 'col', class: 'hide-narrow' }, 'Conversation'))),
      h('tbody', {}, traces.map((t) => h('tr', { 'data-trace': t.id },
        h('td', {}, h('a', { href: traceHash(t.id) }, t.name), h('code', { class: 'id', title: t.id }, t.id)),
        h('td', {}, fmtStart(t.start)),
        h('td', { class: 'num' }, fmtDuration(t.duration)),
        h('td', { class: 'num' }, String(t.trace.spans.length), t.errors ? [' ', h('span', { class: 'badge' }, t.errors === 1 ? '1 error' : `${t.errors} errors`)] : null),
        h('td', { class: 'hide-narrow' }, t.conversation ? h('a', { href: conversationHash(t.conversation, service), class: 'mono' }, t.conversation) : h('span', { class: 'visually-hidden' }, 'none')))))))
  }
  show(toolbar, body)
  announce(failure ? 'The search failed' : `${traces.length} ${traces.length === 1 ? 'trace' : 'traces'}`)
}

async function renderTrace(r, signal) {
  announce('Loading the trace…')
  const url = apiURL(`traces/${encodeURIComponent(r.id)}`)
  raw.href = url.href
  document.title = `Trace ${r.id.slice(0, 8)} · Alicia`
  const back = h('p', { class: 'crumb' }, h('a', { href: '#/' }, '← Recent traces'))
  let data
  try {
    data = await getJSON(url, signal)
  } catch (err) {
    if (signal.aborted) throw err
    const missing = err.status === 404
    show(back, h('h1', { tabindex: -1 }, 'Trace ', h('code', {}, r.id)),
      h('p', { class: 'notice error', role: 'alert' }, missing
        ? 'Jaeger has no trace with this id. It keeps traces in memory while alicia up runs (a restart forgets them), and a turn\'s spans arrive a few seconds after it ends.'
        : `Jaeger did not answer: ${err.message}`))
    announce(missing ? 'No such trace' : 'The trace could not be read')
    return
  }
  const t = model(data.data[0])
  document.title = `${t.name} · Trace ${t.id.slice(0, 8)} · Alicia`

  const summary = h('dl', { class: 'summary' },
    fact('Trace id', h('code', {}, t.id)),
    fact('Started', fmtStart(t.start, true)),
    fact('Duration', fmtDuration(t.duration)),
    fact('Spans', `${t.trace.spans.length}${t.errors ? ` (${t.errors} with an error)` : ''}`),
    fact(t.services.length === 1 ? 'Service' : 'Services', t.services.join(', ')),
    t.conversation ? fact('Conversation', h('a', { href: conversationHash(t.conversation), class: 'mono' }, t.conversation)) : null)

  const details = h('section', { class: 'details', id: 'details', 'aria-labelledby': 'details-title' })
  const tree = waterfall(t, (node) => {
    showDetails(details, t, node)
    history.replaceState(null, '', traceHash(t.id, node.span.spanID))
  })
  const layout = h('div', { class: 'trace-layout' }, tree.element, details)
  show(back,
    h('div', { class: 'bar-row' }, h('h1', { tabindex: -1 }, t.name), h('span', { class: 'spacer' }),
      h('button', { type: 'button', onclick: () => render() }, 'Refresh')),
    summary, layout)
  const selected = r.span && t.nodes.get(r.span)
  if (selected) tree.select(selected, false)
  else showDetails(details, t, null)
  announce(`Trace ${t.name}: ${t.trace.spans.length} spans`)
}

function fact(term, value) {
  return h('div', {}, h('dt', {}, term), h('dd', {}, value))
}

// waterfall renders the spans as an ARIA tree: one row per span (name,
// scope, a bar on the trace's time axis, duration), children in a group
// under their parent. Keys: arrows move, Left/Right also collapse and
// expand, Home/End, Enter or Space selects (as does moving: the details
// follow the focus).
function waterfall(t, onSelect) {
  const total = t.duration || 1
  const items = new Map() // node -> its treeitem
  let selected = null
  let n = 0

  const item = (node) => {
    const s = node.span
    const id = `s${n++}`
    const scope = tagValue(s.tags, SCOPE_TAG)
    const offset = s.startTime - t.start
    const error = isError(s)
    const bar = h('span', { class: `span-bar ${colorClass(scope)}${error ? ' error' : ''}` })
    bar.style.left = `${(offset / total) * 100}%`
    bar.style.width = `${(s.duration / total) * 100}%`
    const label = h('span', { class: 'label' },
      h('span', { class: 'twisty', 'aria-hidden': 'true', onclick: (e) => { e.stopPropagation(); toggle(li) } }),
      h('span', { class: 'names' },
        h('span', { class: 'name', id: `${id}-name`, title: s.operationName }, s.operationName),
        h('span', { class: 'scope', id: `${id}-scope`, title: scope || '' }, scope ? shortScope(scope) : 'no scope')),
      error ? h('span', { class: 'badge', id: `${id}-error` }, 'error') : null)
    label.style.setProperty('--depth', node.depth)
    const row = h('div', { class: 'row' }, label,
      h('span', { class: 'lane' }, bar, h('span', { class: 'visually-hidden', id: `${id}-at` }, `starts at +${fmtDuration(offset)}`)),
      h('span', { class: 'dur', id: `${id}-dur` }, fmtDuration(s.duration)))
    const kids = node.children.filter((c) => c.parent === node)
    const li = h('li', {
      role: 'treeitem', tabindex: -1, 'aria-level': node.depth + 1, 'aria-selected': 'false',
      'aria-expanded': kids.length ? 'true' : null, 'data-span': s.spanID, 'data-name': s.operationName,
      'aria-labelledby': `${id}-name ${error ? `${id}-error ` : ''}${id}-scope ${id}-dur ${id}-at`,
    }, row, kids.length ? h('ul', { role: 'group' }, kids.map(item)) : null)
    li.node = node
    items.set(node, li)
    row.addEventListener('click', () => select(node, true))
    return li
  }

  const tree = h('ul', { class: 'tree', role: 'tree', 'aria-label': 'Spans, nested by parent', onkeydown: keydown },
    t.roots.map(item))
  // The axis: round steps (1, 2, 2.5 or 5 × 10ⁿ µs), four or five of them;
  // each lane draws a line at every step.
  const raw = total / 4
  const p = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((x) => x >= raw)
  const marks = []
  for (let i = 0; i * step <= total * 1.0001; i++) marks.push(i * step)
  const ticks = h('span', { class: 'ticks' }, marks.map((v) => {
    const f = v / total
    const tick = h('span', { class: f > 0.9 ? 'end' : f === 0 ? 'start' : null }, v ? fmtDuration(v) : '0')
    tick.style.left = `${f * 100}%`
    return tick
  }))
  tree.style.setProperty('--grid', `${(step / total) * 100}%`)
  const element = h('section', { class: 'waterfall', 'aria-label': 'Waterfall' },
    h('div', { class: 'row axis', 'aria-hidden': 'true' }, h('span', {}, 'Span · scope'), ticks, h('span', { class: 'dur' }, 'Duration')),
    tree)

  const visible = () => [...tree.querySelectorAll('[role="treeitem"]')].filter((el) => el.offsetParent !== null)
  function select(node, moveFocus) {
    const li = items.get(node)
    // a collapsed ancestor opens
    for (let p = node.parent; p; p = p.parent) items.get(p)?.setAttribute('aria-expanded', 'true')
    if (selected) selected.setAttribute('aria-selected', 'false')
    selected = li
    li.setAttribute('aria-selected', 'true')
    for (const el of items.values()) el.tabIndex = -1
    li.tabIndex = 0
    if (moveFocus) li.focus()
    else li.scrollIntoView({ block: 'nearest' })
    onSelect(node)
  }
  function toggle(li) {
    const open = li.getAttribute('aria-expanded')
    if (open == null) return
    li.setAttribute('aria-expanded', open === 'true' ? 'false' : 'true')
    if (selected && selected.offsetParent === null) select(li.node, true) // the selection was hidden
  }
  function keydown(e) {
    const li = e.target.closest('[role="treeitem"]')
    if (!li) return
    const list = visible()
    const i = list.indexOf(li)
    const go = (el) => el && select(el.node, true)
    switch (e.key) {
      case 'ArrowDown': go(list[i + 1]); break
      case 'ArrowUp': go(list[i - 1]); break
      case 'Home': go(list[0]); break
      case 'End': go(list[list.length - 1]); break
      case 'ArrowRight':
        if (li.getAttribute('aria-expanded') === 'false') toggle(li)
        else if (li.getAttribute('aria-expanded') === 'true') go(list[i + 1])
        break
      case 'ArrowLeft':
        if (li.getAttribute('aria-expanded') === 'true') toggle(li)
        else if (li.node.parent) go(items.get(li.node.parent))
        break
      case 'Enter':
      case ' ':
        select(li.node, true)
        break
      default:
        return
    }
    e.preventDefault()
  }
  // The first row takes the focus when Tab reaches the tree.
  const first = items.get(t.roots[0])
  if (first) first.tabIndex = 0
  return { element, select }
}

function showDetails(panel, t, node) {
  if (!node) {
    panel.replaceChildren(h('h2', { id: 'details-title' }, 'Span details'),
      h('p', {}, 'Select a span (click it, or move with the arrow keys) to see its attributes and events.'))
    return
  }
  const s = node.span
  const tags = s.tags || []
  const scope = tagValue(tags, SCOPE_TAG)
  const version = tagValue(tags, 'otel.scope.version')
  const statusCode = tagValue(tags, 'otel.status_code')
  const statusText = tagValue(tags, 'otel.status_description')
  const process = t.trace.processes?.[s.processID]
  const parent = node.parent?.span
  const missingParent = !parent && (s.references || []).find((r) => r.refType === 'CHILD_OF')
  const attrs = tags.filter((x) => !FACT_TAGS.has(x.key)).sort((a, b) => a.key.localeCompare(b.key))
  const logs = [...(s.logs || [])].sort((a, b) => a.timestamp - b.timestamp)
  const jump = (n) => h('button', { type: 'button', class: 'link-button', onclick: () => document.querySelector(`[role="treeitem"][data-span="${n.span.spanID}"]`)?.click() }, n.span.operationName)

  panel.replaceChildren(...[
    h('h2', { id: 'details-title' }, s.operationName),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Scope'), h('dd', {}, scope ? h('code', {}, scope + (version ? ` ${version}` : '')) : 'none'),
      h('dt', {}, 'Service'), h('dd', {}, process?.serviceName || s.processID || 'unknown'),
      h('dt', {}, 'Kind'), h('dd', {}, tagValue(tags, 'span.kind') || 'unspecified'),
      h('dt', {}, 'Status'), h('dd', {}, statusCode ? [statusCode, statusText ? `: ${statusText}` : ''] : 'unset',
        isError(s) ? [' ', h('span', { class: 'badge' }, 'error')] : null),
      h('dt', {}, 'Starts'), h('dd', {}, `+${fmtDuration(s.startTime - t.start)} · `, fmtStart(s.startTime, true)),
      h('dt', {}, 'Duration'), h('dd', {}, fmtDuration(s.duration)),
      h('dt', {}, 'Span id'), h('dd', {}, h('code', {}, s.spanID)),
      h('dt', {}, 'Parent'), h('dd', {}, parent ? jump(node.parent) : missingParent ? ['not in the trace: ', h('code', {}, missingParent.spanID)] : 'none (a root)'),
      node.children.length ? [h('dt', {}, 'Children'), h('dd', {}, String(node.children.length))] : null),
    h('h3', { id: 'attrs-title' }, `Attributes (${attrs.length})`),
    attrs.length ? kvTable(attrs, 'attrs-title') : h('p', {}, 'None.'),
    h('h3', { id: 'events-title' }, `Events (${logs.length})`),
    logs.length
      ? h('ol', { class: 'events', 'aria-labelledby': 'events-title' }, logs.map((l) => {
        const fields = l.fields || []
        const name = fields.find((f) => f.key === 'event')?.value || '(unnamed)'
        const rest = fields.filter((f) => f.key !== 'event')
        return h('li', {}, h('span', { class: 'at' }, `+${fmtDuration(l.timestamp - t.start)}`), ' ', h('strong', {}, String(name)),
          rest.length ? kvTable(rest) : null)
      }))
      : h('p', {}, 'None.'),
    process?.tags?.length
      ? h('details', {}, h('summary', {}, `Resource attributes (${process.tags.length})`), kvTable(process.tags))
      : null,
    (s.warnings || []).length ? [h('h3', {}, 'Warnings'), h('ul', {}, s.warnings.map((w) => h('li', {}, w)))] : null,
  ].flat().filter((c) => c != null))
}

function kvTable(tags, labelledby) {
  return h('table', { class: 'kv', 'aria-labelledby': labelledby },
    h('thead', { class: 'visually-hidden' }, h('tr', {}, h('th', { scope: 'col' }, 'Key'), h('th', { scope: 'col' }, 'Value'))),
    h('tbody', {}, tags.map((x) => h('tr', {}, h('td', {}, x.key),
      h('td', {}, x.key === CONVERSATION_TAG && typeof x.value === 'string' ? h('a', { href: conversationHash(x.value) }, x.value) : fmtValue(x))))))
}

// The search box: a trace id (16 or 32 hex digits, or a traceparent
// header) opens the trace; anything else is a conversation id.
document.getElementById('search').addEventListener('submit', (e) => {
  e.preventDefault()
  const q = e.target.q.value.trim()
  if (!q) return
  const tp = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/i.exec(q)
  const id = tp ? tp[1] : /^([0-9a-f]{16}|[0-9a-f]{32})$/i.test(q) ? q : null
  const target = id ? traceHash(id.toLowerCase()) : conversationHash(q, route().service)
  if (location.hash === target) render()
  else location.hash = target
})

// Jaeger's version, which its query service writes into index.html.
const v = /JAEGER_VERSION = (\{.*\});/.exec(document.getElementById('jaeger-version')?.content.textContent || '')
if (v) {
  try {
    const info = JSON.parse(v[1])
    if (info.gitVersion) document.getElementById('version').textContent = `Jaeger ${info.gitVersion}`
  } catch {
    // left out
  }
}

window.addEventListener('hashchange', render)
render()
