/* Unit tests for pycmd.c: which commands are a plain Python invocation, split as sh would. */
#include <stdlib.h>

#include "core/pycmd.h"
#include "tap.h"

/* the words of cmd joined with '|', or "(no)" */
static const char *
words(const char *cmd)
{
	static char out[512];
	struct pycmd pc;
	size_t n = 0;

	if (pycmd_parse(cmd, strlen(cmd), &pc) < 0)
		return "(no)";
	out[0] = '\0';
	for (int i = 0; i < pc.argc; i++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s", i ? "|" : "", pc.argv[i]);
	if (pc.argv[pc.argc] != NULL)
		snprintf(out, sizeof(out), "(argv not NULL-terminated)");
	pycmd_free(&pc);
	return out;
}

static int
kind(const char *cmd)
{
	struct pycmd pc;
	int k;

	if (pycmd_parse(cmd, strlen(cmd), &pc) < 0)
		return -1;
	k = (int)pc.kind;
	pycmd_free(&pc);
	return k;
}

int
main(void)
{
	char path[256];

	/* plain invocations, as the shell splits them */
	is_str(words("python3 -c 'print(1)'"), "python3|-c|print(1)", "-c with single quotes");
	is_str(words("python -c \"import sys; print(sys.argv)\" a b"),
	       "python|-c|import sys; print(sys.argv)|a|b", "-c with double quotes and arguments");
	is_str(words("  python3\tscript.py  x=1 --flag  "), "python3|script.py|x=1|--flag",
	       "blanks around words; = and options after the script are arguments");
	is_str(words("python3 -c 'a'\"b\"c\\ d"), "python3|-c|abc d",
	       "one word from three quotings");
	is_str(words("python3 -c \"\\$HOME \\\"q\\\" \\\\ \\n\""), "python3|-c|$HOME \"q\" \\ \\n",
	       "backslashes in double quotes: only before $ ` \" \\ newline");
	is_str(words("python3 -c ''"), "python3|-c|", "an empty program is a word");
	is_str(words("python3 -c 'print(1)\nprint(2)'"), "python3|-c|print(1)\nprint(2)",
	       "a newline inside quotes is the code's");
	is_str(words("python3 \\\n -c x"), "python3|-c|x", "a line continuation makes no word");
	is_str(words("python3 -c x\\\ny"), "python3|-c|xy",
	       "a continuation inside a word joins it");
	is_str(words("/usr/bin/python3 s.py"), "/usr/bin/python3|s.py", "an absolute interpreter");
	is_str(words("'python3' -c x"), "python3|-c|x", "a quoted command name");
	is_str(words("python3 -c x 'caf\xc3\xa9' \xc3\xa9"), "python3|-c|x|caf\xc3\xa9|\xc3\xa9",
	       "UTF-8 words, quoted or not");
	ok(kind("python3 -c x") == PYCMD_CODE, "-c is code");
	ok(kind("python3 app/main.py -c") == PYCMD_SCRIPT, "a script (its own -c is an argument)");

	/* what the shell would do more with, or the interpreter would read differently */
	const char *no[] = {
	    "python3 -c x; ls",
	    "python3 -c x && y",
	    "python3 -c x | cat",
	    "python3 s.py > out",
	    "python3 < in",
	    "python3 -c \"$HOME\"",
	    "python3 -c $HOME",
	    "python3 -c `id`",
	    "python3 -c \"`id`\"",
	    "python3 *.py",
	    "python3 s?.py",
	    "python3 [a].py",
	    "python3 ~/s.py",
	    "python3 s.py # note",
	    "A=1 python3 s.py",
	    "python3 -c x &",
	    "(python3 -c x)",
	    "python3 -c 'x",
	    "python3 -c \"x",
	    "python3 -c x\\",
	    "python3 -c x\npython3 -c y",
	    "python3 -m http.server",
	    "python3 -u s.py",
	    "python3 -",
	    "python3",
	    "python3 -c",
	    "python3 ''",
	    "ls -l",
	    "python2 -c x",
	    "./python3 -c x",
	    "",
	    "   ",
	    "python3 {a,b}.py",
	    "! python3 -c x",
	    "python3 -c x\r",
	    "python3 -I -c x",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		is_str(words(no[i]), "(no)", "not plain: case %zu", i);
	{
		struct pycmd pc;
		ok(pycmd_parse("python3 -c x\0y", 14, &pc) == -1, "a NUL is refused");
	}

	/* which file the shell executes */
	ok(pycmd_which("sh", "/nonexistent:/bin:/usr/bin", path, sizeof(path)) == 0 &&
	       strcmp(path, "/bin/sh") == 0,
	   "the first directory that has it");
	ok(pycmd_which("sh", "/nonexistent", path, sizeof(path)) == -1, "none has it");
	ok(pycmd_which("passwd", "/etc:/usr/bin", path, sizeof(path)) == 0 &&
	       strcmp(path, "/usr/bin/passwd") == 0,
	   "a file that is not executable is skipped");
	ok(pycmd_which("bin", "/usr:/", path, sizeof(path)) == -1, "a directory is not executed");
	ok(pycmd_which("/x/y", "/bin", path, sizeof(path)) == 0 && strcmp(path, "/x/y") == 0,
	   "a name with a slash is itself");
	ok(pycmd_which("sh", "/bin", path, 7) == -1, "no room for the path");
	return tap_done();
}
