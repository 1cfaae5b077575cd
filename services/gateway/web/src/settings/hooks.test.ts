import { describe, expect, it } from 'vitest'
import type { MCPServer } from '../types'
import { withServer } from './hooks'

const srv = (name: string, url = `http://${name}`) => ({ name, url, transport: 'http', enabled: true, status: 'connected' }) as unknown as MCPServer

describe('settings', () => {
  it('an added MCP server takes its place by name, replacing one of the same name', () => {
    const list = [srv('alpha'), srv('gamma')]
    expect(withServer(list, srv('beta')).map((s) => s.name)).toEqual(['alpha', 'beta', 'gamma'])
    const again = withServer(list, srv('gamma', 'http://elsewhere'))
    expect(again.map((s) => s.url)).toEqual(['http://alpha', 'http://elsewhere'])
  })
})
