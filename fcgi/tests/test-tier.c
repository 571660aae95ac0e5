/* Unit tests for tier.c: the guess of a program's warm tier from its text. */
#include "core/tier.h"
#include "tap.h"

#include <string.h>

static bool
names(const char *code, const char *module)
{
	return tier_code_names(code, strlen(code), module);
}

int
main(void)
{
	ok(names("import pandas", "pandas"), "import pandas names pandas");
	ok(names("import numpy, pandas as pd\n", "pandas"), "in a list, with an alias");
	ok(names("from scipy.stats import norm", "scipy"), "a submodule names its package");
	ok(names("x = sklearn.linear_model", "sklearn.linear_model"),
	   "a dotted module is matched by its top-level package");
	ok(names("pandas", "pandas") && names("(pandas)", "pandas"),
	   "the whole text, or in brackets");
	ok(names("# uses scipy\nprint(1)", "scipy"), "a comment counts (the text alone)");
	ok(!names("import my_pandas", "pandas") && !names("import pandas2", "pandas") &&
	       !names("scipyx = 1", "scipy") && !names("xscipy", "scipy"),
	   "not inside a longer identifier");
	ok(!names("import numpy", "pandas") && !names("", "pandas"), "another module, or nothing");
	ok(!names("pandaspandas", "pandas") && names("pandaspandas pandas", "pandas"),
	   "every occurrence is tried");
	ok(!names("épandas", "pandas"), "a non-ASCII identifier character is part of the word");
	ok(!names("pand", "pandas") && !names("import x", ""), "shorter text; an empty module");
	{
		/* not NUL-terminated: only len bytes are read */
		char buf[6] = {'s', 'c', 'i', 'p', 'y', 'x'};
		ok(tier_code_names(buf, 5, "scipy") && !tier_code_names(buf, 6, "scipy"),
		   "only len bytes are read");
	}
	return tap_done();
}
