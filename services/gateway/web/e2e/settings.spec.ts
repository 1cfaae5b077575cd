// Settings and status: the backends and whether each answers, the models,
// tools on and off (administrators), MCP servers added, watched and removed.
import { expect, test } from '@playwright/test'
import { signIn, stack } from './fixtures'

test('the backends, whether each answers, and the models', async ({ page }) => {
  await signIn(page, stack.aliceKey, '/settings')
  await expect(page.getByRole('heading', { name: 'Settings and status' })).toBeVisible()
  const backends = page.getByRole('list', { name: 'Backends' })
  await expect(backends.getByTestId('server-connection')).toContainText('Connection: connected')
  await expect(backends.getByTestId('engine-llm')).toContainText('fake-chat')
  await expect(backends.getByTestId('engine-llm')).toContainText('answers')
  // No room-agent runs in this stack: the page says voice cannot start.
  await expect(backends.getByTestId('voice-agents')).toContainText('none running')
  await expect(backends.getByTestId('engine-embeddings')).toContainText('fake-embedding')
  await expect(backends.getByTestId('engine-embeddings')).toContainText('answers')
  await expect(backends.getByTestId('engine-tts')).toContainText('fake-tts')
  await expect(backends.getByTestId('engine-tts')).toContainText('answers')
  // Nothing serves the speech recognition URL the stack was given.
  await expect(backends.getByTestId('engine-asr')).toContainText('not answering')
})

test('an administrator switches tools and adds, watches and removes an MCP server', async ({ page }) => {
  await signIn(page, stack.aliceKey, '/settings')
  const tools = page.getByRole('list', { name: 'Tools' })
  for (const name of ['calculator', 'memory_query', 'web_search']) {
    await expect(tools.getByRole('checkbox', { name: new RegExp(`^${name}`) })).toBeChecked()
  }
  const search = tools.getByRole('checkbox', { name: /^web_search/ })
  // The checkbox shows the server's answer: click, then wait for it.
  await search.click()
  await expect(search).not.toBeChecked()
  await page.reload()
  await expect(search).not.toBeChecked()
  await search.click()
  await expect(search).toBeChecked()
  await page.reload()
  await expect(search).toBeChecked()

  // An MCP server: added, then connected as the llm reports it, its tool listed.
  const servers = page.getByRole('list', { name: 'MCP servers' })
  await page.getByLabel('Name', { exact: true }).fill('webtools')
  await page.getByLabel('URL (http or https)').fill(stack.mcpURL)
  await page.getByRole('button', { name: 'Add server' }).click()
  const row = servers.getByTestId('mcp-webtools')
  await expect(row).toContainText('webtools')
  await expect(row).toContainText(/(?<!dis)connected/, { timeout: 30_000 })
  const echo = tools.getByRole('checkbox', { name: /^mcp_webtools_echo/ })
  await expect(async () => {
    await page.getByRole('button', { name: 'Refresh' }).click()
    await expect(echo).toBeVisible({ timeout: 1000 })
  }).toPass({ timeout: 20_000 })

  await row.getByRole('button', { name: 'Remove webtools' }).click()
  await expect(servers.getByTestId('mcp-webtools')).toHaveCount(0)
  await page.reload()
  await expect(servers.getByTestId('mcp-webtools')).toHaveCount(0)
  await expect(async () => {
    await page.getByRole('button', { name: 'Refresh' }).click()
    await expect(echo).toHaveCount(0, { timeout: 1000 })
  }).toPass({ timeout: 20_000 })
})

test('a user who is no administrator sees the tools but cannot switch them', async ({ page }) => {
  await signIn(page, stack.bobKey, '/settings')
  await expect(page.getByText('Only an administrator can switch tools.')).toBeVisible()
  await expect(page.getByRole('list', { name: 'Tools' }).getByRole('checkbox', { name: /^calculator/ })).toBeDisabled()
  await expect(page.getByRole('button', { name: 'Add server' })).toHaveCount(0)
})
