// Votes with quick reasons on an answer, its tool use, its memory use and
// its reasoning step; a note on the answer. The counts are the server's,
// and a reload shows them again.
import { expect, test, type Locator } from '@playwright/test'
import { api, completed, json, lastAnswer, newChat, say, signIn, stack } from './fixtures'

const ups = (scope: Locator, label: string) => scope.getByRole('button', { name: `Vote up ${label}` })
const downs = (scope: Locator, label: string) => scope.getByRole('button', { name: `Vote down ${label}` })

test('votes and notes on an answer and its parts, kept by the server', async ({ page }) => {
  const alice = await api(stack.aliceKey)
  const memory = await json<{ id: string }>(await alice.post('/v1/memories', { data: { content: 'Zorblat everything is forty two' } }))
  try {
    await signIn(page, stack.aliceKey)
    await newChat(page, say.everything)
    let answer = await completed(lastAnswer(page))

    // The answer: up, with a quick reason.
    await ups(answer, 'this answer').click()
    await expect(ups(answer, 'this answer')).toHaveAttribute('aria-pressed', 'true')
    await expect(ups(answer, 'this answer').getByTestId('upvotes')).toHaveText('1')
    const why = answer.getByRole('group', { name: 'Why?' })
    await why.getByRole('button', { name: 'Helpful' }).click()
    await expect(why).toHaveCount(0)
    await expect(ups(answer, 'this answer').getByTestId('upvotes')).toHaveText('1')

    // The tool use: down, with a reason.
    const card = answer.getByTestId('tool-use')
    await card.getByRole('button', { name: /calculator/ }).click()
    await downs(card, 'tool use calculator').click()
    await expect(downs(card, 'tool use calculator').getByTestId('downvotes')).toHaveText('1')
    await card.getByRole('group', { name: 'Why?' }).getByRole('button', { name: 'Not helpful' }).click()

    // The memory it used: up.
    await answer.getByText('Used 1 memory').click()
    await ups(answer, "this memory's use").click()
    await expect(ups(answer, "this memory's use").getByTestId('upvotes')).toHaveText('1')

    // The reasoning step: down.
    await answer.getByText('Reasoning (1 step)').click()
    await downs(answer, 'reasoning step 1').click()
    await expect(downs(answer, 'reasoning step 1').getByTestId('downvotes')).toHaveText('1')

    // A note on the answer.
    await answer.getByRole('button', { name: 'Notes' }).click()
    await expect(answer.getByText('No notes yet.')).toBeVisible()
    await answer.getByLabel('Note', { exact: true }).fill('The number needs a source.')
    await answer.getByLabel('Category').selectOption('correction')
    await answer.getByRole('button', { name: 'Add', exact: true }).click()
    await expect(answer.getByRole('list', { name: 'Notes' })).toContainText('correction: The number needs a source.')
    await expect(answer.getByRole('button', { name: 'Notes (1)' })).toBeVisible()

    // Everything comes back from the server after a reload.
    await page.reload()
    answer = await completed(lastAnswer(page))
    await expect(ups(answer, 'this answer')).toHaveAttribute('aria-pressed', 'true')
    await expect(ups(answer, 'this answer').getByTestId('upvotes')).toHaveText('1')
    await expect(answer.getByRole('button', { name: 'Notes (1)' })).toBeVisible()
    await answer.getByTestId('tool-use').getByRole('button', { name: /calculator/ }).click()
    await expect(downs(answer, 'tool use calculator').getByTestId('downvotes')).toHaveText('1')
    await answer.getByText('Used 1 memory').click()
    await expect(ups(answer, "this memory's use").getByTestId('upvotes')).toHaveText('1')
    await answer.getByText('Reasoning (1 step)').click()
    await expect(downs(answer, 'reasoning step 1').getByTestId('downvotes')).toHaveText('1')
    await answer.getByRole('button', { name: 'Notes (1)' }).click()
    await expect(answer.getByRole('list', { name: 'Notes' })).toContainText('The number needs a source.')

    // Taking a vote back: pressing it again.
    await ups(answer, 'this answer').click()
    await expect(ups(answer, 'this answer').getByTestId('upvotes')).toHaveText('0')
    await expect(ups(answer, 'this answer')).toHaveAttribute('aria-pressed', 'false')
  } finally {
    await alice.delete(`/v1/memories/${memory.id}`)
    await alice.dispose()
  }
})
