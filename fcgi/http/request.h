/*
 * request.h - the body of POST /execute, validated.
 */
#ifndef CODEBOX_REQUEST_H
#define CODEBOX_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/limits.h"

struct request {
	const char *code; /* borrowed from root; may hold NUL bytes */
	size_t code_len;
	const char *stdin_data; /* borrowed from root, or "" */
	size_t stdin_len;
	long wall_ms; /* the run's wall-clock limit */
	bool details;
	bool artifacts; /* the answer lists the files the run created or changed */
	char *files;    /* owned: the inputs, packed (files.h), or NULL */
	size_t files_len;
	size_t n_files;
	json_t *root; /* owned */
};

/*
 * Parses and validates body[0..len) exactly as API.md says, first failure wins. Returns 0 and
 * fills r (free it with request_free), or -1 with a sentence for the client in message (never
 * echoing the code); the reply is then 400 invalid_request.
 */
int request_parse(struct request *r, const char *body, size_t len, const struct limits *l,
                  char *message, size_t message_len);

/*
 * The first step of request_parse(): body[0..len) read as JSON ("\u0000" allowed in strings,
 * a key twice refused). Returns the document (the caller owns it), or NULL with request_parse()'s
 * sentence in message.
 */
json_t *request_load(const char *body, size_t len, char *message, size_t message_len);

/*
 * The rest of request_parse(), for a body already read once (request_load(), MCP's
 * arguments): validates root, which it takes (stolen: r->root, freed by request_free(), or
 * freed here on failure). Returns 0 and fills r, or -1 with the sentence in message.
 */
int request_take(struct request *r, json_t *root, const struct limits *l, char *message,
                 size_t message_len);

void request_free(struct request *r);

#endif
