/*
 * pycmd.h - port 8888's commands that are a plain Python invocation, which a warm template
 * can run as `/bin/sh -c` would have run them.
 *
 * A command qualifies when the shell would do nothing but split it into words and execute the
 * first: `python` or `python3` (or an absolute path) then `-c CODE` or a script path, then
 * arguments. Quoting as the shell's ('...', "..." and backslashes) is undone; anything that
 * would make the shell do more (expansions, globs, redirections, pipes, lists, assignments,
 * comments, a tilde) or the interpreter read other options or stdin disqualifies it, and the
 * command runs under /bin/sh as any other.
 */
#ifndef CODEBOX_PYCMD_H
#define CODEBOX_PYCMD_H

#include <stddef.h>

enum pycmd_kind {
	PYCMD_CODE,   /* python3 -c CODE [ARG...]: argv[2] is the code */
	PYCMD_SCRIPT, /* python3 SCRIPT [ARG...]: argv[1] is the script */
};

struct pycmd {
	enum pycmd_kind kind;
	int argc;
	char **argv; /* argc words, then NULL; they point into buf */
	char *buf;
};

/* Splits cmd (len bytes, no NUL) as the shell would. 0 when it is a plain Python invocation
 * (free with pycmd_free), -1 when it is not or memory ran out (nothing to free). */
int pycmd_parse(const char *cmd, size_t len, struct pycmd *pc);

void pycmd_free(struct pycmd *pc);

/*
 * What the shell executes for name under path (a PATH value): name itself when it holds a
 * slash, else the first directory's regular file of that name that is executable. 0 with the
 * file's path in out, or -1.
 */
int pycmd_which(const char *name, const char *path, char *out, size_t out_len);

#endif
