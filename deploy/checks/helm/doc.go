// Package helm renders the Helm chart in deploy/helm/alicia with the Helm
// SDK, with no network access, and validates what it renders: every
// manifest decoded strictly into the Kubernetes API types (an unknown
// field or kind fails), then the chart's own promises (probes, liveness
// that no dependency's outage fails, resources, one core per room-agent
// pod, secrets mounted where the *_FILE variables point, selectors, ports,
// the variables the services really read). It renders the chart with the
// defaults, each ci/ values file and the install command of the chart's
// README, read from the README; it checks that the example values of the
// official nats chart give nats-server the users of deploy/nats.conf, and
// that the example manifests (model servers, LiveKit) run what
// docker-compose.yml runs, where the chart's defaults point.
// The checks are the tests of this package:
// cd deploy/checks && GOWORK=off go test ./helm/
package helm
