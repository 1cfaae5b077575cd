// Package web holds the browser client of the gateway. Dist is the
// committed build of the web client (see web/README.md): the gateway
// serves it at every path outside /v1 and the health and metrics routes.
package web

import "embed"

// Dist is the committed build of the web client (npm run build writes it;
// see web/README.md), with the files under its dist directory.
//
//go:embed all:dist
var Dist embed.FS
