// Settings and status: the server's backends (server-info), the tools and
// the MCP servers, and the changes an administrator makes to them, on the
// one hook pattern of src/ui/hooks.ts.
import { useEffect } from 'react'
import { api } from '../api'
import type { MCPServer, ServerInfoJSON, Tool } from '../types'
import { useResource } from '../ui/hooks'

// The MCP servers' states are read again this often while the page is open
// (a server connecting or failing shows without a refresh).
export const MCP_POLL_MS = 5000

export interface Status {
  info: ServerInfoJSON
  tools: Tool[]
  servers: MCPServer[]
}

// withServer puts s in the list of MCP servers, by name.
export function withServer(list: MCPServer[], s: MCPServer): MCPServer[] {
  return [...list.filter((x) => x.name !== s.name), s].sort((a, b) => a.name.localeCompare(b.name))
}

export function useServerStatus() {
  const r = useResource<Status>('status', async () => {
    const [info, t, m] = await Promise.all([api.serverInfo(), api.tools(), api.mcpServers()])
    return { info, tools: t.tools, servers: m.servers }
  })
  const { update } = r
  useEffect(() => {
    const t = setInterval(() => {
      api.mcpServers().then((m) => update((had) => had && { ...had, servers: m.servers }), () => {})
    }, MCP_POLL_MS)
    return () => clearInterval(t)
  }, [update])
  const setServers = (fn: (ss: MCPServer[]) => MCPServer[]) => update((had) => had && { ...had, servers: fn(had.servers) })
  return {
    info: r.data?.info,
    tools: r.data?.tools ?? [],
    servers: r.data?.servers ?? [],
    error: r.error,
    refresh: r.reload,
    setTool: async (name: string, enabled: boolean) => {
      const n = await api.setTool(name, enabled)
      update((had) => had && { ...had, tools: had.tools.map((x) => (x.name === n.name ? n : x)) })
    },
    addServer: async (name: string, url: string) => {
      const s = await api.putMCPServer(name, url)
      setServers((ss) => withServer(ss, s))
    },
    setServer: async (name: string, enabled: boolean) => {
      const n = await api.setMCPServer(name, enabled)
      setServers((ss) => ss.map((x) => (x.name === n.name ? n : x)))
    },
    removeServer: async (name: string) => {
      await api.deleteMCPServer(name)
      setServers((ss) => ss.filter((x) => x.name !== name))
    },
  }
}
