/*
 * tool.h - GET /tool: a tool definition for LLM function calling, made from /capabilities.
 */
#ifndef CODEBOX_TOOL_H
#define CODEBOX_TOOL_H

#include <stddef.h>

/* The tool's name (GET /tool, MCP's tools/list and tools/call) */
#define TOOL_NAME "code_executor"

enum tool_format {
	TOOL_ANTHROPIC, /* {"name", "description", "input_schema"} */
	TOOL_OPENAI, /* {"type": "function", "function": {"name", "description", "parameters"}} */
};

/*
 * Which format a request's query string asks for: none or "format=anthropic" is Anthropic's,
 * "format=openai" OpenAI's. Returns 0, or -1 for any other format.
 */
int tool_parse_format(const char *request_uri, enum tool_format *format);

/*
 * The tool definition, generated from the /capabilities document (capabilities[0..len), as
 * reply_capabilities() wrote it): every module with its version, every limit as a number,
 * the three sentences verbatim, and the response shape, so that it cannot drift from what
 * the sandbox enforces. Returns a newly allocated JSON text (caller frees) or NULL.
 */
char *tool_render(const char *capabilities, size_t len, enum tool_format format, size_t *out_len);

#endif
