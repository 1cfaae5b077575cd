import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import './index.css'
import { App } from './app/App'
import { OfflineBanner } from './session/OfflineBanner'
import { prefetch } from './prefetch'
import { registerServiceWorker } from './pwa'
import { followNetwork, useApp } from './store/app'

if (window.matchMedia?.('(prefers-color-scheme: dark)').matches) document.documentElement.classList.add('dark')

prefetch()
followNetwork(useApp)
registerServiceWorker()

const root = document.getElementById('root')
if (root)
  createRoot(root).render(
    <StrictMode>
      <App />
      <OfflineBanner />
    </StrictMode>,
  )
