/*
 * snapshot.h - a session's snapshot as the client holds it: the envelope, its key, base64.
 *
 * A snapshot is what a session's own interpreter wrote, inside its sandbox (sessionproto.h,
 * SESSION_OP_SNAPSHOT), wrapped by the worker in a versioned envelope and an HMAC-SHA256 with
 * the pool's snapshot key, then base64:
 *
 *   struct snapshot_head (magic, version, head's and payload's lengths, the sessions' Python
 *   major.minor, when it was made) | payload | HMAC-SHA256(key, head | payload)
 *
 * The key is the fleet's (the file CODEBOX_FLEET_KEY_FILE names, shared by every pod of a
 * fleet) or, without one, random, made once by the supervisor before the workers fork: a
 * snapshot then restores only on the pod that made it, while its pool lives. A restore checks
 * everything here (base64, size, envelope, version, HMAC in constant time) before any session
 * is made or any byte of it reaches an interpreter. The key is never in an interpreter (the
 * zygote is exec'd, and a worker keeps its copy in a page its children see zeroed) nor logged.
 */
#ifndef CODEBOX_SNAPSHOT_H
#define CODEBOX_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAPSHOT_KEY_MIN 32
#define SNAPSHOT_KEY_MAX 4096
#define SNAPSHOT_VERSION 1
#define SNAPSHOT_MAC_LEN 32

/* the envelope's head, little-endian, before the payload */
struct snapshot_head {
	char magic[8];        /* SNAPSHOT_MAGIC */
	uint32_t version;     /* SNAPSHOT_VERSION */
	uint32_t head_len;    /* sizeof(struct snapshot_head) */
	uint64_t payload_len; /* the bytes after the head, before the HMAC */
	int64_t created_ms;   /* CLOCK_REALTIME */
	char python[16];      /* the sessions' interpreter, "3.11" (NUL-padded) */
};

#define SNAPSHOT_MAGIC "CBXSNAP\n"
/* what the envelope adds to a payload */
#define SNAPSHOT_OVERHEAD (sizeof(struct snapshot_head) + SNAPSHOT_MAC_LEN)

struct snapshot_key {
	unsigned char *bytes; /* SNAPSHOT_KEY_MAX bytes (a page of its own in a worker) */
	size_t len;
	bool fleet; /* from CODEBOX_FLEET_KEY_FILE; false: random, this pool's own */
};

/*
 * The supervisor's key, before the first fork: path's bytes (trailing whitespace dropped; at
 * least SNAPSHOT_KEY_MIN and at most SNAPSHOT_KEY_MAX of them), or, path NULL or empty, a
 * random one. Returns 0, or -1 with why (never a byte of the key).
 */
int snapshot_key_load(struct snapshot_key *k, const char *path, char *why, size_t why_len);

/* A worker's own copy of k, in a page that its children (a cold run's init) see zeroed
 * (MADV_WIPEONFORK); the inherited one is wiped. Returns 0, or -1 (k unchanged). */
int snapshot_key_adopt(struct snapshot_key *k);

/* The base64 length of a snapshot whose payload is payload_max bytes. */
size_t snapshot_b64_max(size_t payload_max);

/*
 * Wraps payload[0..len) (python: "3.11") in the envelope, signs it with k, and returns it as
 * base64 (NUL-ended, malloc'd; its length in *b64_len), or NULL (out of memory).
 */
char *snapshot_seal(const struct snapshot_key *k, const char *python, const unsigned char *payload,
                    size_t len, size_t *b64_len);

/* Why a snapshot was refused (snapshot_open()). */
enum snapshot_check {
	SNAPSHOT_OK,
	SNAPSHOT_MALFORMED,        /* not base64, not an envelope, truncated: 400 */
	SNAPSHOT_TOO_LARGE,        /* over the bound: 413 */
	SNAPSHOT_VERSION_MISMATCH, /* another format or another Python: 422 */
	SNAPSHOT_FORGED,           /* its HMAC does not verify: altered, or another key's: 422 */
	SNAPSHOT_NO_MEMORY,        /* 503 */
};

/*
 * Checks b64[0..b64_len) against k, python and payload_max: 0 (SNAPSHOT_OK) with *payload
 * (malloc'd) and *len, or why it is refused, with a sentence for the client in why.
 */
enum snapshot_check snapshot_open(const struct snapshot_key *k, const char *python, const char *b64,
                                  size_t b64_len, size_t payload_max, unsigned char **payload,
                                  size_t *len, char *why, size_t why_len);

#endif
