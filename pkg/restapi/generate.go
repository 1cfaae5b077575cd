// Package restapi holds the JSON shapes of the gateway's REST API (/v1),
// generated from proto-schemas/rest/openapi.json: the gateway answers with
// them and the CLI decodes them. The same document generates the web
// client's types (services/gateway/web/src/rest.gen.ts) and the reference
// section of services/gateway/API.md; `task gen-check` fails when any of
// them is stale.
package restapi

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../proto-schemas/rest/openapi.json
//go:generate go run ./internal/apidoc -spec ../../proto-schemas/rest/openapi.json -doc ../../services/gateway/API.md
