import { describe, expect, it } from 'vitest'
import type { Memory } from '../types'
import { replaced, tagsOf } from './hooks'

const mem = (id: string, archived = false) => ({ id, content: id, tags: [], importance: 0.5, pinned: false, archived }) as unknown as Memory

describe('memories', () => {
  it('reads comma-separated tags, trimmed, without empty ones', () => {
    expect(tagsOf(' work, home ,,  ')).toEqual(['work', 'home'])
    expect(tagsOf('')).toEqual([])
  })

  it('puts a changed memory in place, and an archived one goes unless archived ones are shown', () => {
    const list = [mem('a'), mem('b'), mem('c')]
    expect(replaced(list, { ...mem('b'), content: 'new' }, false).map((m) => m.content)).toEqual(['a', 'new', 'c'])
    expect(replaced(list, mem('b', true), false).map((m) => m.id)).toEqual(['a', 'c'])
    expect(replaced(list, mem('b', true), true).map((m) => m.id)).toEqual(['a', 'b', 'c'])
  })
})
