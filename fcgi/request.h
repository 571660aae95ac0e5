/*
 * request.h - the body of POST /execute, validated.
 */
#ifndef CODEBOX_REQUEST_H
#define CODEBOX_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "limits.h"

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

void request_free(struct request *r);

#endif
