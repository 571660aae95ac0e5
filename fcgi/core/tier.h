/*
 * tier.h - which warm tier a program needs, guessed from its text (pure; unit-tested).
 */
#ifndef CODEBOX_TIER_H
#define CODEBOX_TIER_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Whether code (len bytes, not NUL-terminated) names module's top-level package (module up
 * to its first '.') as a word: not inside a longer identifier, so "import pandas",
 * "from scipy.stats import norm" and "sklearn.linear_model" name theirs, and "my_pandas" or
 * "scipyx" do not. Comments and strings count: the guess is from the text alone.
 */
bool tier_code_names(const char *code, size_t len, const char *module);

#endif
