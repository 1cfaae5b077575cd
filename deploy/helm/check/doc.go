// Package check renders the Helm chart in deploy/helm/alicia with the Helm
// SDK, with no network access, and validates what it renders: every
// manifest decoded strictly into the Kubernetes API types (an unknown
// field or kind fails), then the chart's own promises (probes, resources,
// one core per room-agent pod, secrets mounted where the *_FILE variables
// point, selectors, ports, the variables the services really read).
// The checks are the tests of this package: go test ./deploy/helm/check/.
package check
