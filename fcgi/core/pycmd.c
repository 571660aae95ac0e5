/*
 * pycmd.c - which of port 8888's commands are a plain Python invocation (pycmd.h).
 *
 * The grammar is the part of POSIX sh's token recognition that cannot do anything but quote:
 * blanks separate words; '...' quotes everything up to the next quote; "..." quotes
 * everything but $ and ` (refused: they expand) and a backslash before $ ` " \ or a newline;
 * an unquoted backslash quotes the next byte (a newline: both vanish). Unquoted, only bytes
 * that are ordinary in every position are accepted: letters, digits, bytes from 0x80, and
 * - _ . / , : @ % + (plus = after the first word, where it cannot be an assignment).
 */
#include "core/pycmd.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool
ordinary(unsigned char c, bool first_word)
{
	if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	if (c == '=')
		return !first_word;
	return strchr("-_./,:@%+", c) != NULL && c != '\0';
}

/* Splits cmd into NUL-terminated words in buf; their starts in words. Returns the count, or
 * -1 for anything the shell would not take as plain words. */
static int
split(const char *cmd, size_t len, char *buf, char **words)
{
	size_t i = 0;
	char *o = buf;
	int n = 0;

	for (;;) {
		bool in_word = false;

		while (i < len && (cmd[i] == ' ' || cmd[i] == '\t'))
			i++;
		if (i == len)
			return n;
		words[n] = o;
		while (i < len && cmd[i] != ' ' && cmd[i] != '\t') {
			unsigned char c = (unsigned char)cmd[i];

			if (c == '\'') {
				const char *end = memchr(cmd + i + 1, '\'', len - i - 1);
				if (end == NULL)
					return -1;
				memcpy(o, cmd + i + 1, (size_t)(end - cmd - (long)i - 1));
				o += end - cmd - (long)i - 1;
				i = (size_t)(end - cmd) + 1;
			} else if (c == '"') {
				for (i++;; i++) {
					if (i == len || cmd[i] == '$' || cmd[i] == '`')
						return -1;
					if (cmd[i] == '"')
						break;
					if (cmd[i] == '\\' && i + 1 < len &&
					    strchr("$`\"\\\n", cmd[i + 1]) != NULL) {
						if (cmd[++i] != '\n')
							*o++ = cmd[i];
						continue;
					}
					*o++ = cmd[i];
				}
				i++;
			} else if (c == '\\') {
				if (i + 1 == len)
					return -1;
				i += 2;
				if (cmd[i - 1] == '\n')
					continue; /* a line continuation: both vanish */
				*o++ = cmd[i - 1];
			} else if (ordinary(c, n == 0)) {
				*o++ = (char)c;
				i++;
			} else {
				return -1;
			}
			in_word = true;
		}
		if (!in_word)
			continue; /* only continuations: no word */
		*o++ = '\0';
		n++;
	}
}

int
pycmd_parse(const char *cmd, size_t len, struct pycmd *pc)
{
	int n;

	memset(pc, 0, sizeof(*pc));
	if (memchr(cmd, '\0', len) != NULL)
		return -1;
	/* every word takes at least one byte and a separator */
	pc->buf = malloc(len + 1);
	pc->argv = calloc(len / 2 + 2, sizeof(char *));
	if (pc->buf == NULL || pc->argv == NULL)
		goto no;
	n = split(cmd, len, pc->buf, pc->argv);
	if (n < 2)
		goto no;
	pc->argv[n] = NULL;
	pc->argc = n;
	if (strcmp(pc->argv[0], "python") != 0 && strcmp(pc->argv[0], "python3") != 0 &&
	    pc->argv[0][0] != '/')
		goto no;
	if (strcmp(pc->argv[1], "-c") == 0) {
		if (n < 3)
			goto no;
		pc->kind = PYCMD_CODE;
		return 0;
	}
	/* any other option, or `-` (stdin) */
	if (pc->argv[1][0] == '-' || pc->argv[1][0] == '\0')
		goto no;
	pc->kind = PYCMD_SCRIPT;
	return 0;
no:
	pycmd_free(pc);
	return -1;
}

void
pycmd_free(struct pycmd *pc)
{
	free(pc->buf);
	free(pc->argv);
	memset(pc, 0, sizeof(*pc));
}

int
pycmd_which(const char *name, const char *path, char *out, size_t out_len)
{
	size_t nlen = strlen(name);

	if (nlen == 0)
		return -1;
	if (strchr(name, '/') != NULL) {
		if (nlen >= out_len)
			return -1;
		memcpy(out, name, nlen + 1);
		return 0;
	}
	while (path != NULL && *path != '\0') {
		const char *colon = strchr(path, ':');
		size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
		struct stat st;

		/* an empty entry is the working directory, as for the shell */
		if (dlen + 1 + nlen < out_len) {
			if (dlen == 0) {
				memcpy(out, name, nlen + 1);
			} else {
				memcpy(out, path, dlen);
				out[dlen] = '/';
				memcpy(out + dlen + 1, name, nlen + 1);
			}
			if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
				return 0;
		}
		path = colon ? colon + 1 : NULL;
	}
	return -1;
}
