// Package protocol holds the Alicia wire protocol: the body types generated
// from proto-schemas (types_gen.go), the message type registry, the Envelope
// and its canonical MessagePack and JSON codecs.
//
// Decode and DecodeJSON treat their input as untrusted: they check its size,
// its structure and every body against the JSON Schema of its type, and
// report problems as *Error with a protocol error code. Encode writes the
// canonical MessagePack form described in proto-schemas/README.md, so the
// same envelope always gives the same bytes in Go and in TypeScript.
//
// Optional scalar fields of the generated bodies are pointers (*string,
// *int32, *bool, *int64, *float64); optional arrays, maps and bytes are nil
// when absent. Use Ptr to fill them. An optional field a client sends as
// nil (null in JSON) decodes as absent; Encode omits absent fields.
package protocol

//go:generate go run github.com/atombender/go-jsonschema@v0.24.1 --only-models --tags json --capitalization ID,MCP,ASR,TTS,LLM --struct-name-from-title --package protocol --output types_gen.go ../../proto-schemas/acknowledgement.json ../../proto-schemas/assistant_message.json ../../proto-schemas/assistant_sentence.json ../../proto-schemas/audio_chunk.json ../../proto-schemas/branch_update.json ../../proto-schemas/commentary.json ../../proto-schemas/configuration.json ../../proto-schemas/control_stop.json ../../proto-schemas/control_variation.json ../../proto-schemas/conversation_update.json ../../proto-schemas/error_message.json ../../proto-schemas/feedback.json ../../proto-schemas/feedback_confirmation.json ../../proto-schemas/memory_action.json ../../proto-schemas/memory_confirmation.json ../../proto-schemas/memory_trace.json ../../proto-schemas/note_confirmation.json ../../proto-schemas/reasoning_step.json ../../proto-schemas/server_info.json ../../proto-schemas/session_stats.json ../../proto-schemas/start_answer.json ../../proto-schemas/sync_request.json ../../proto-schemas/sync_response.json ../../proto-schemas/tool_use_request.json ../../proto-schemas/tool_use_result.json ../../proto-schemas/transcription.json ../../proto-schemas/user_message.json ../../proto-schemas/user_note.json ../../proto-schemas/tool_registration.json ../../proto-schemas/tool_setting.json ../../proto-schemas/mcp_server_config.json ../../proto-schemas/mcp_server_status.json ../../proto-schemas/asr_job.json ../../proto-schemas/speech_audio.json ../../proto-schemas/sentence_audio.json ../../proto-schemas/sentence_playout.json ../../proto-schemas/agent_dispatch.json ../../proto-schemas/turn_event.json ../../proto-schemas/turn_judgement.json ../../proto-schemas/prompt_version.json ../../proto-schemas/dimension_preference.json ../../proto-schemas/elite_options.json ../../proto-schemas/elite_select.json ../../proto-schemas/optimization_run.json ../../proto-schemas/learning_consent.json ../../proto-schemas/user_settings.json ../../proto-schemas/timer.json
//go:generate go run ./internal/goldengen -dir ../../proto-schemas/golden
