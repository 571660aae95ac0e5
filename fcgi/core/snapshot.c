/*
 * snapshot.c - a session's snapshot's envelope, key and base64 (snapshot.h).
 */
#include "core/snapshot.h"

#include "core/util.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* the supervisor's copy, static: no allocation to leak, inherited by every worker */
static unsigned char snapshot_key_static[SNAPSHOT_KEY_MAX];

int
snapshot_key_load(struct snapshot_key *k, const char *path, char *why, size_t why_len)
{
	ssize_t n;
	int fd;

	k->bytes = snapshot_key_static;
	k->len = 0;
	k->fleet = path != NULL && *path != '\0';
	if (!k->fleet) {
		if (getrandom(k->bytes, SNAPSHOT_KEY_MIN, 0) != SNAPSHOT_KEY_MIN) {
			snprintf(why, why_len, "no random snapshot key: getrandom() failed: %s",
			         strerror(errno));
			return -1;
		}
		k->len = SNAPSHOT_KEY_MIN;
		return 0;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(why, why_len, "CODEBOX_FLEET_KEY_FILE %s: %s", path, strerror(errno));
		return -1;
	}
	/* one byte past the bound tells a file too long */
	{
		static unsigned char buf[SNAPSHOT_KEY_MAX + 1];
		n = util_read_max(fd, (char *)buf, sizeof(buf));
		close(fd);
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
		                 buf[n - 1] == '\t'))
			n--;
		if (n >= SNAPSHOT_KEY_MIN && n <= SNAPSHOT_KEY_MAX)
			memcpy(k->bytes, buf, (size_t)n);
		explicit_bzero(buf, sizeof(buf));
	}
	if (n < 0) {
		snprintf(why, why_len, "CODEBOX_FLEET_KEY_FILE %s: read failed: %s", path,
		         strerror(errno));
		return -1;
	}
	if (n < SNAPSHOT_KEY_MIN || n > SNAPSHOT_KEY_MAX) {
		snprintf(why, why_len,
		         "CODEBOX_FLEET_KEY_FILE %s holds %zd bytes (trailing whitespace aside): a "
		         "snapshot key is %d to %d bytes (e.g. `head -c 48 /dev/urandom | base64`)",
		         path, n, SNAPSHOT_KEY_MIN, SNAPSHOT_KEY_MAX);
		return -1;
	}
	k->len = (size_t)n;
	return 0;
}

int
snapshot_key_adopt(struct snapshot_key *k)
{
	unsigned char *page = mmap(NULL, SNAPSHOT_KEY_MAX, PROT_READ | PROT_WRITE,
	                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED)
		return -1;
	if (madvise(page, SNAPSHOT_KEY_MAX, MADV_WIPEONFORK) < 0 ||
	    madvise(page, SNAPSHOT_KEY_MAX, MADV_DONTDUMP) < 0) {
		munmap(page, SNAPSHOT_KEY_MAX);
		return -1;
	}
	memcpy(page, k->bytes, k->len);
	explicit_bzero(k->bytes, SNAPSHOT_KEY_MAX);
	k->bytes = page;
	return 0;
}

size_t
snapshot_b64_max(size_t payload_max)
{
	return 4 * ((payload_max + SNAPSHOT_OVERHEAD + 2) / 3);
}

/* HMAC-SHA256 of msg[0..len) with k into mac; 0 or -1. */
static int
snapshot_mac(const struct snapshot_key *k, const unsigned char *msg, size_t len,
             unsigned char mac[SNAPSHOT_MAC_LEN])
{
	unsigned int n = 0;

	if (HMAC(EVP_sha256(), k->bytes, (int)k->len, msg, len, mac, &n) == NULL ||
	    n != SNAPSHOT_MAC_LEN)
		return -1;
	return 0;
}

/* "3.11" of "3.11.2" (at most 15 bytes), NUL-padded into out[16] */
static void
snapshot_python(const char *version, char out[16])
{
	const char *dot = strchr(version, '.');
	size_t n = strlen(version);

	memset(out, 0, 16);
	if (dot != NULL && strchr(dot + 1, '.') != NULL)
		n = (size_t)(strchr(dot + 1, '.') - version);
	memcpy(out, version, n < 15 ? n : 15);
}

char *
snapshot_seal(const struct snapshot_key *k, const char *python, const unsigned char *payload,
              size_t len, size_t *b64_len)
{
	size_t total = SNAPSHOT_OVERHEAD + len;
	unsigned char *env = malloc(total);
	struct snapshot_head h = {.version = SNAPSHOT_VERSION,
	                          .head_len = sizeof(struct snapshot_head),
	                          .payload_len = len};
	struct timespec ts;
	char *b64 = NULL;

	if (env == NULL)
		return NULL;
	memcpy(h.magic, SNAPSHOT_MAGIC, sizeof(h.magic));
	clock_gettime(CLOCK_REALTIME, &ts);
	h.created_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	snapshot_python(python, h.python);
	memcpy(env, &h, sizeof(h));
	memcpy(env + sizeof(h), payload, len);
	if (snapshot_mac(k, env, sizeof(h) + len, env + sizeof(h) + len) == 0) {
		b64 = malloc(4 * ((total + 2) / 3) + 1);
		if (b64 != NULL)
			*b64_len = (size_t)EVP_EncodeBlock((unsigned char *)b64, env, (int)total);
	}
	free(env);
	return b64;
}

/* Whether b64[0..n) is strict base64: a multiple of 4 long, of the alphabet, padded only at
 * its end. */
static bool
snapshot_b64_valid(const char *b64, size_t n)
{
	size_t pad = 0;

	if (n == 0 || n % 4 != 0)
		return false;
	while (pad < 2 && b64[n - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < n - pad; i++) {
		unsigned char c = (unsigned char)b64[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '+' || c == '/'))
			return false;
	}
	return true;
}

/* The envelope's checks once decoded (env[0..n)): its form, its bound, its HMAC, its
 * versions. */
static enum snapshot_check
snapshot_check_envelope(const struct snapshot_key *k, const char *python, const unsigned char *env,
                        size_t n, size_t payload_max, char *why, size_t why_len)
{
	struct snapshot_head h;
	unsigned char mac[SNAPSHOT_MAC_LEN];
	char want[16];

	if (n < SNAPSHOT_OVERHEAD) {
		snprintf(why, why_len, "the snapshot is truncated or not a snapshot");
		return SNAPSHOT_MALFORMED;
	}
	memcpy(&h, env, sizeof(h));
	if (memcmp(h.magic, SNAPSHOT_MAGIC, sizeof(h.magic)) != 0 ||
	    h.head_len != sizeof(struct snapshot_head)) {
		snprintf(why, why_len, "not a codebox snapshot (its envelope is not one)");
		return SNAPSHOT_MALFORMED;
	}
	if (h.payload_len != n - SNAPSHOT_OVERHEAD) {
		snprintf(why, why_len,
		         "the snapshot is truncated or has bytes added: its envelope says %llu "
		         "bytes of state, it holds %zu",
		         (unsigned long long)h.payload_len, n - SNAPSHOT_OVERHEAD);
		return SNAPSHOT_MALFORMED;
	}
	if (h.payload_len > payload_max) {
		snprintf(why, why_len,
		         "the snapshot holds %llu bytes of state, over this server's bound of %zu "
		         "(CODEBOX_SNAPSHOT_MAX_BYTES)",
		         (unsigned long long)h.payload_len, payload_max);
		return SNAPSHOT_TOO_LARGE;
	}
	if (snapshot_mac(k, env, n - SNAPSHOT_MAC_LEN, mac) < 0)
		return SNAPSHOT_NO_MEMORY;
	if (CRYPTO_memcmp(mac, env + n - SNAPSHOT_MAC_LEN, SNAPSHOT_MAC_LEN) != 0) {
		snprintf(why, why_len,
		         "the snapshot's signature does not verify: it was altered, or made by "
		         "another fleet (another snapshot key) or by a pod that has restarted "
		         "without a fleet key");
		return SNAPSHOT_FORGED;
	}
	snapshot_python(python, want);
	if (h.version != SNAPSHOT_VERSION || memcmp(h.python, want, sizeof(want)) != 0) {
		h.python[15] = '\0';
		snprintf(why, why_len,
		         "the snapshot is of format %u and Python %s; this server restores format "
		         "%d and Python %s",
		         h.version, h.python, SNAPSHOT_VERSION, want);
		return SNAPSHOT_VERSION_MISMATCH;
	}
	return SNAPSHOT_OK;
}

enum snapshot_check
snapshot_open(const struct snapshot_key *k, const char *python, const char *b64, size_t b64_len,
              size_t payload_max, unsigned char **payload, size_t *len, char *why, size_t why_len)
{
	enum snapshot_check rc;
	unsigned char *env;
	size_t n, pad = 0;
	int got;

	*payload = NULL;
	*len = 0;
	if (b64_len > snapshot_b64_max(payload_max)) {
		snprintf(why, why_len,
		         "the snapshot is %zu bytes of base64, over this server's bound of %zu "
		         "(CODEBOX_SNAPSHOT_MAX_BYTES %zu of state)",
		         b64_len, snapshot_b64_max(payload_max), payload_max);
		return SNAPSHOT_TOO_LARGE;
	}
	if (!snapshot_b64_valid(b64, b64_len)) {
		snprintf(why, why_len, "the snapshot is not base64 (or is truncated)");
		return SNAPSHOT_MALFORMED;
	}
	env = malloc(b64_len / 4 * 3 + 1);
	if (env == NULL)
		return SNAPSHOT_NO_MEMORY;
	got = EVP_DecodeBlock(env, (const unsigned char *)b64, (int)b64_len);
	while (pad < 2 && b64[b64_len - 1 - pad] == '=')
		pad++;
	if (got < 0 || (size_t)got < pad) {
		free(env);
		snprintf(why, why_len, "the snapshot is not base64 (or is truncated)");
		return SNAPSHOT_MALFORMED;
	}
	n = (size_t)got - pad;
	rc = snapshot_check_envelope(k, python, env, n, payload_max, why, why_len);
	if (rc != SNAPSHOT_OK) {
		free(env);
		return rc;
	}
	*len = n - SNAPSHOT_OVERHEAD;
	memmove(env, env + sizeof(struct snapshot_head), *len);
	*payload = env;
	return SNAPSHOT_OK;
}
