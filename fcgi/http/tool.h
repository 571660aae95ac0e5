/*
 * tool.h - GET /tool: a tool definition for LLM function calling, made from /capabilities and
 * /isolation.
 */
#ifndef CODEBOX_TOOL_H
#define CODEBOX_TOOL_H

#include <stddef.h>

/* The tool's name (GET /tool, MCP's tools/list and tools/call) */
#define TOOL_NAME "code_executor"

/* OpenAI refuses a function description longer than this many characters */
#define TOOL_OPENAI_DESCRIPTION_MAX 1024

enum tool_format {
	TOOL_ANTHROPIC, /* {"name", "description", "input_schema"} */
	TOOL_OPENAI, /* {"type": "function", "function": {"name", "description", "parameters"}} */
	TOOL_OPENAI_STRICT, /* the same with "strict": true, its schema in strict mode's rules */
};

/*
 * Which form a request's query string asks for: format=anthropic (the default) or
 * format=openai, and strict=true or strict=false (OpenAI's strict mode), in any order. Returns
 * 0, or -1 with why[0..why_len) saying what is wrong (an unknown parameter, a bad or repeated
 * value, strict=true with Anthropic's form), fit for a 400's message.
 */
int tool_parse_format(const char *request_uri, enum tool_format *format, char *why, size_t why_len);

/*
 * The tool definition, generated from the /capabilities document (capabilities[0..caps_len),
 * as reply_capabilities() wrote it) and the /isolation document (isolation[0..iso_len), as
 * reply_isolation() wrote it): every module with its version, every limit a program must
 * respect as a number (time, sizes, memory, processes, disk, CPU where enforced), the three
 * sentences verbatim, the keys a model may send (code, stdin, timeoutSeconds, and files and
 * artifacts when /isolation publishes their bounds, session when it has sessions) and the
 * response shape, so that it cannot
 * drift from what the sandbox enforces. Nothing in it is meant for HTTP clients. Returns a
 * newly allocated JSON text (caller frees) or NULL (a document unreadable, out of memory).
 */
char *tool_render(const char *capabilities, size_t caps_len, const char *isolation, size_t iso_len,
                  enum tool_format format, size_t *out_len);

#endif
