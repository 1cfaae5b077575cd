import './testing/browser'
import { describe, expect, it } from 'vitest'
import { href, parse } from './router'

describe('router', () => {
  it('reads and writes every screen’s path', () => {
    const cases: [string, ReturnType<typeof parse>][] = [
      ['/', { name: 'home' }],
      ['/c/ac_1', { name: 'conversation', id: 'ac_1', message: undefined }],
      ['/c/ac_1/timeline', { name: 'timeline', id: 'ac_1' }],
      ['/memories', { name: 'memories', id: undefined }],
      ['/settings', { name: 'settings' }],
      ['/improve', { name: 'optimize' }],
      ['/signin', { name: 'signin' }],
    ]
    for (const [path, route] of cases) {
      expect(parse(path), path).toEqual(route)
      expect(href(route), path).toBe(path)
    }
    expect(parse('/improve/more')).toEqual({ name: 'notfound' })
  })
})
