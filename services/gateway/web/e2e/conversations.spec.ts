// The sidebar: paging, new, rename, archive, delete, filter; each
// conversation has its own URL, restored by a reload or a deep link.
import { expect, test, type Page } from '@playwright/test'
import { api, completed, conversationId, json, lastAnswer, newChat, signIn, stack, userMessages } from './fixtures'

const sidebar = (page: Page) => page.getByRole('navigation', { name: 'Conversations' })

test('the sidebar pages through more than 30 conversations and filters by title', async ({ page }) => {
  const alice = await api(stack.aliceKey)
  const tag = 'Paging' // each run has a database of its own
  for (let i = 1; i <= 35; i++) {
    await json(await alice.post('/v1/conversations', { data: { title: `${tag} ${String(i).padStart(2, '0')}` } }))
  }
  await alice.dispose()

  await signIn(page, stack.aliceKey)
  const nav = sidebar(page)
  // Newest first: the first page (30) ends at 06; 01..05 come with the next page.
  await expect(nav.getByRole('link', { name: `${tag} 35` })).toBeVisible()
  await expect(nav.getByRole('link', { name: `${tag} 06` })).toBeAttached()
  await expect(nav.getByRole('link', { name: `${tag} 05` })).toHaveCount(0)
  await nav.getByRole('link', { name: `${tag} 06` }).scrollIntoViewIfNeeded()
  // Scrolling to the end loads the next page; the list may re-render while
  // the last item is being scrolled to (it detaches), so scroll again until
  // the last page is there.
  await expect(async () => {
    await nav.getByRole('listitem').last().scrollIntoViewIfNeeded({ timeout: 2_000 })
    await expect(nav.getByRole('link', { name: `${tag} 01` })).toBeAttached({ timeout: 1_000 })
  }).toPass({ timeout: 15_000 })
  expect(await nav.getByRole('link', { name: new RegExp(tag) }).count()).toBe(35)

  // Filter by title: the server's ?q= match.
  await nav.getByLabel('Filter conversations by title').fill(`${tag} 07`)
  await expect(nav.getByRole('link', { name: new RegExp(tag) })).toHaveCount(1)
  await expect(nav.getByRole('link', { name: `${tag} 07` })).toBeVisible()
  await nav.getByLabel('Filter conversations by title').fill(`${tag} nothing like it`)
  await expect(nav.getByText('No conversation matches.')).toBeVisible()
  await nav.getByLabel('Filter conversations by title').fill('')
  await expect(nav.getByRole('link', { name: `${tag} 35` })).toBeVisible()
})

test('new, rename, reload, deep link, archive and delete', async ({ page, browser }) => {
  await signIn(page, stack.aliceKey)
  const id = await newChat(page, 'Hello from the conversations spec')
  await completed(lastAnswer(page))
  const nav = sidebar(page)
  const first = nav.getByRole('link', { name: 'Hello from the conversations spec' })
  await expect(first).toHaveAttribute('aria-current', 'page')
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Hello from the conversations spec')

  // Rename from the row's menu.
  const title = `Renamed ${Date.now().toString(36)}`
  await nav.getByRole('button', { name: 'Actions for Hello from the conversations spec' }).click()
  await page.getByRole('menuitem', { name: 'Rename' }).click()
  await page.getByLabel('New title for Hello from the conversations spec').fill(title)
  await page.getByLabel('New title for Hello from the conversations spec').press('Enter')
  await expect(nav.getByRole('link', { name: title })).toBeVisible()
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(title)

  // Its own URL: a reload and a deep link in a new page restore it.
  expect(page.url()).toBe(`${stack.base}/c/${id}`)
  await page.reload()
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(title)
  await expect(userMessages(page).first()).toContainText('Hello from the conversations spec')
  await completed(lastAnswer(page))
  const other = await browser.newContext()
  const deep = await other.newPage()
  await signIn(deep, stack.aliceKey, `/c/${id}`)
  await expect(deep.getByRole('heading', { level: 1 })).toHaveText(title)
  await expect(userMessages(deep).first()).toContainText('Hello from the conversations spec')
  await other.close()

  // A second conversation, to move between the two by URL.
  await page.getByRole('button', { name: 'New conversation' }).click()
  await expect(page).toHaveURL(`${stack.base}/`)
  const second = await newChat(page, 'A second conversation')
  expect(second).not.toBe(id)
  await nav.getByRole('link', { name: title }).click()
  await expect(page).toHaveURL(`${stack.base}/c/${id}`)
  await page.goBack()
  await expect(page).toHaveURL(`${stack.base}/c/${second}`)
  await expect(userMessages(page).first()).toContainText('A second conversation')

  // Archive: it leaves the active list for the archived one.
  await nav.getByRole('button', { name: `Actions for ${title}` }).click()
  await page.getByRole('menuitem', { name: 'Archive' }).click()
  await expect(nav.getByRole('link', { name: title })).toHaveCount(0)
  await nav.getByRole('tab', { name: 'Archived' }).click()
  await expect(nav.getByRole('link', { name: title })).toBeVisible()
  await nav.getByRole('link', { name: title }).click()
  await expect(page.getByRole('region', { name: 'Conversation' }).getByText('Archived', { exact: true })).toBeVisible()
  await nav.getByRole('tab', { name: 'Active' }).click()

  // Delete, confirmed: gone from the list, its URL says so.
  await nav.getByRole('tab', { name: 'Archived' }).click()
  page.once('dialog', (d) => void d.accept())
  await nav.getByRole('button', { name: `Actions for ${title}` }).click()
  await page.getByRole('menuitem', { name: 'Delete' }).click()
  await expect(nav.getByRole('link', { name: title })).toHaveCount(0)
  await page.goto(`/c/${id}`)
  await expect(page.getByRole('heading', { name: 'Conversation not found' })).toBeVisible()
  expect(conversationId(page)).toBe(id)
})
