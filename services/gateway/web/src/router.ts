// A small history-API router: the gateway answers every client route with
// index.html, and the page picks the screen from the path.
import { useSyncExternalStore } from 'react'

export type Route =
  | { name: 'home' }
  | { name: 'conversation'; id: string; message?: string }
  | { name: 'timeline'; id: string }
  | { name: 'memories'; id?: string }
  | { name: 'settings' }
  | { name: 'optimize' }
  | { name: 'signin' }
  | { name: 'notfound' }

const listeners = new Set<() => void>()
function notify() {
  listeners.forEach((l) => l())
}
window.addEventListener('popstate', notify)

export function parse(path: string, search = ''): Route {
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent)
  if (parts.length === 0) return { name: 'home' }
  if (parts[0] === 'c' && parts.length === 2 && parts[1]) {
    const message = new URLSearchParams(search).get('m') ?? undefined
    return { name: 'conversation', id: parts[1], message }
  }
  if (parts[0] === 'c' && parts.length === 3 && parts[1] && parts[2] === 'timeline') return { name: 'timeline', id: parts[1] }
  if (parts[0] === 'memories' && parts.length <= 2) return { name: 'memories', id: parts[1] }
  if (parts[0] === 'settings' && parts.length === 1) return { name: 'settings' }
  if (parts[0] === 'improve' && parts.length === 1) return { name: 'optimize' }
  if (parts[0] === 'signin' && parts.length === 1) return { name: 'signin' }
  return { name: 'notfound' }
}

export function href(r: Route): string {
  switch (r.name) {
    case 'home':
      return '/'
    case 'conversation':
      return `/c/${encodeURIComponent(r.id)}${r.message ? `?m=${encodeURIComponent(r.message)}` : ''}`
    case 'timeline':
      return `/c/${encodeURIComponent(r.id)}/timeline`
    case 'memories':
      return r.id ? `/memories/${encodeURIComponent(r.id)}` : '/memories'
    case 'settings':
      return '/settings'
    case 'optimize':
      return '/improve'
    case 'signin':
      return '/signin'
    case 'notfound':
      return '/'
  }
}

export function navigate(to: string | Route, replace = false): void {
  const url = typeof to === 'string' ? to : href(to)
  if (url === location.pathname + location.search) return
  if (replace) history.replaceState(null, '', url)
  else history.pushState(null, '', url)
  notify()
}

let cached: { key: string; route: Route } | undefined
function snapshot(): Route {
  const key = location.pathname + location.search
  if (!cached || cached.key !== key) cached = { key, route: parse(location.pathname, location.search) }
  return cached.route
}

export function useRoute(): Route {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l)
      return () => listeners.delete(l)
    },
    snapshot,
  )
}
