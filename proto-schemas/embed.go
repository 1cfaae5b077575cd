// Package protoschemas embeds the JSON Schema files of the Alicia protocol
// (one per message type plus envelope.json) and the golden vectors under
// golden/, so Go code can validate against exactly the files in the repo.
package protoschemas

import "embed"

// FS holds *.json (the schemas) and golden/<type>.json|.msgpack.
//
//go:embed *.json golden
var FS embed.FS

// BaseURL is the common prefix of every schema's $id; a schema file name
// appended to it gives that schema's $id.
const BaseURL = "https://alicia-voice.github.io/alicia/proto-schemas/"
