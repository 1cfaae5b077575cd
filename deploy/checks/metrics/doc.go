// Package metrics holds the test that writes and checks deploy/METRICS.md,
// the table of every service's Prometheus metrics, from the metrics the
// services register, and checks that the alert rules and the dashboard in
// deploy/ use only metrics of that table.
package metrics
