/*
 * mcp.h - the Model Context Protocol at POST /mcp (Streamable HTTP, stateless): JSON-RPC 2.0
 * messages in, one JSON answer out. What the protocol says, without FastCGI or runs: the
 * worker (mcpapi.c) reads the request, asks here what to answer, and runs the tool's program
 * as POST /execute would.
 */
#ifndef CODEBOX_MCP_H
#define CODEBOX_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/jsonw.h"
#include "core/outcome.h"

/* JSON-RPC 2.0's error codes */
#define MCP_PARSE_ERROR -32700
#define MCP_INVALID_REQUEST -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS -32602
/* the implementation-defined range: every execution slot is in use (HTTP 429) */
#define MCP_BUSY -32000

/* The protocol versions served, newest first (those of the official TypeScript SDK). */
extern const char *const mcp_versions[];

/* Whether v is one of mcp_versions. */
bool mcp_version_supported(const char *v);

/* The version initialize answers: the client's when served, else the newest. */
const char *mcp_negotiate(const char *requested);

/*
 * Whether a request whose Host header is host may be served (the specification's defence
 * against DNS rebinding, with the Origin check): the loopback names (localhost, 127.0.0.1,
 * [::1]) and the names listed in allowed, with any port or none. allowed holds names
 * separated by spaces or commas, each exact ("codebox.example") or a suffix
 * ("*.codebox.svc.cluster.local": any name ending in ".codebox.svc.cluster.local"); names
 * compare without case and without a trailing dot; a port in an entry is ignored. NULL or
 * empty allowed: the loopback names alone. No Host header (NULL), an empty one or a malformed
 * one (a port that is not 1 to 5 digits, an unclosed "[") is never served.
 */
bool mcp_host_allowed(const char *host, const char *allowed);

/*
 * Whether a request from origin, whose Host header is host, may be served: no Origin header
 * (not a browser); the server's own origin (http:// or https:// followed by exactly the Host
 * header, without case: same-origin); a loopback origin (http:// or https:// and localhost,
 * 127.0.0.1 or [::1], any port: a page served on the client's own machine); or an origin
 * listed exactly in allowed (origins separated by spaces or commas; NULL or empty: none).
 * The Host must have been checked first (mcp_host_allowed()): the same-origin rule trusts it.
 */
bool mcp_origin_allowed(const char *origin, const char *host, const char *allowed);

/*
 * Whether a POST body of this Content-Type is taken: application/json (without case), with
 * optional parameters after ";", of which a charset must be utf-8. NULL (none) is not.
 */
bool mcp_content_type_ok(const char *content_type);

enum mcp_kind {
	MCP_MSG_REQUEST,      /* method and id: it gets an answer */
	MCP_MSG_NOTIFICATION, /* method, no id: 202 */
	MCP_MSG_RESPONSE,     /* a client's result or error: 202 */
	MCP_MSG_INVALID,      /* error MCP_INVALID_REQUEST (why), id when one could be read */
	MCP_MSG_UNPARSABLE,   /* error MCP_PARSE_ERROR */
};

struct mcp_message {
	enum mcp_kind kind;
	json_t *root;
	json_t *id;         /* borrowed from root; NULL for none */
	const char *method; /* borrowed */
	json_t *params;     /* borrowed; NULL when absent */
	char why[160];
};

/* Reads one JSON-RPC message (a batch is MCP_MSG_INVALID). Free with mcp_message_free(). */
void mcp_parse(const char *body, size_t len, struct mcp_message *m);
void mcp_message_free(struct mcp_message *m);

/*
 * The bounds of a request's params._meta.progressToken, which every progress notification
 * repeats (an unbounded one multiplies what the pool sends by the number of output pieces):
 * MCP's token is a string or an integer; here a string of at most this many bytes (as sent,
 * in UTF-8) or an integer within JSON's safe range, +-(2^53 - 1).
 */
#define MCP_PROGRESS_TOKEN_MAX_BYTES 256
#define MCP_PROGRESS_TOKEN_MAX_INT 9007199254740991LL

/*
 * params's _meta.progressToken (params may be NULL): 0 with *token borrowed from params (NULL
 * when there is none), or -1 with why (a sentence for error MCP_INVALID_PARAMS) when it is
 * neither a string within MCP_PROGRESS_TOKEN_MAX_BYTES nor an integer within
 * MCP_PROGRESS_TOKEN_MAX_INT (null, a real number, an object...).
 */
int mcp_progress_token(const json_t *params, const json_t **token, char *why, size_t why_len);

/* {"jsonrpc":"2.0","id":id,"error":{"code","message"}}; id NULL: no id. Caller frees. */
char *mcp_error(const json_t *id, int code, const char *message, size_t *len);

/* {"jsonrpc":"2.0","id":id,"result":result}; result is stolen. Caller frees. */
char *mcp_result(const json_t *id, json_t *result, size_t *len);

/*
 * initialize's result: the negotiated version, serverInfo, capabilities.tools and the
 * instructions. NULL when out of memory.
 */
json_t *mcp_initialize(const char *requested_version, const char *server_version,
                       const char *instructions);

/*
 * tools/list's result from GET /tool's document (its Anthropic form: name, description,
 * input_schema): the one tool, with its outputSchema (POST /execute's answer). NULL when
 * tool is not that document.
 */
json_t *mcp_tools(const char *tool, size_t len);

/* The text block of tools/call's answer for a run, a text a model reads well: the status,
 * stdout, stderr, the result, a line per file of o->artifacts, and for a session's execution
 * (session_id not NULL) the value and what became of the session. Caller frees; NULL if out
 * of memory. */
char *mcp_call_text(const struct run_outcome *o, size_t max_result_bytes, const char *session_id,
                    size_t *len);

/*
 * tools/call's answer for a run, into w (any kind of writer: counted, then streamed): the text
 * block (mcp_call_text()'s), an image block for each picture among o->artifacts whose content
 * was sent (encoded straight from the run's report), the /execute answer as
 * structuredContent (reply_outcome_write(); its "artifacts" when files; a session's execution,
 * session_id not NULL: reply_session_outcome_write()), and isError when the program did not
 * succeed.
 */
/* An embedded resource after a call's text and images: a session's snapshot (base64 blob). */
struct mcp_resource {
	const char *uri;
	const char *mime_type;
	const char *blob; /* base64 */
	size_t blob_len;
};

void mcp_call_answer_write(struct jsonw *w, const json_t *id, const struct run_outcome *o,
                           const char *text, size_t text_len, size_t max_result_bytes, bool details,
                           const char *request_id, bool files, const char *session_id,
                           const struct mcp_resource *res);

/* The same as a string (caller frees), or NULL. */
char *mcp_call_answer(const json_t *id, const struct run_outcome *o, size_t max_result_bytes,
                      bool details, const char *request_id, bool files, size_t *len);

/* tools/call's answer for a tool error the model can act on (isError, one text block). */
char *mcp_call_error(const json_t *id, const char *text, size_t *len);

#endif
